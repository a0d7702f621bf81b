// swift-tools-version:5.9
// solo's engine in a Swift program: a module map over include/solo.h (CSolo) and a thin wrapper
// (Solo). Link against libsolo (`cargo build --release -p solo-capi`), e.g.
//   swift build -Xlinker -L../../target/release
// Not compiled by the project's CI (no Swift toolchain there); see README.md.
import PackageDescription

let package = Package(
    name: "Solo",
    products: [.library(name: "Solo", targets: ["Solo"])],
    targets: [
        .systemLibrary(name: "CSolo", path: "Sources/CSolo"),
        .target(name: "Solo", dependencies: ["CSolo"], path: "Sources/Solo"),
        .executableTarget(name: "SoloChat", dependencies: ["Solo"], path: "Examples"),
    ]
)
