//! Every `.cu` file solo compiles, embedded in the binary, and each kernel's typed launcher.
//!
//! Each file sits next to the Rust module that launches it (`ops/*.rs`), which declares the
//! file's kernels once with `kernel_file!`: their parameters with Rust types, from which come the
//! typed launcher (`gemv_cu::gemv_bf16(gpu, launch, w, x, …)`, so a launch with the wrong
//! arguments does not compile) and the signature the CI test checks against the `.cu` source's
//! `extern "C" __global__` declaration. The model's widths (`widths`) are pasted in front of every
//! file as `#define`s, then `common.cuh` (NVRTC here gets no in-memory headers), then the headers
//! a file names (`kernel_file! { pub mod m = "x.cu" with "lora.cuh", "moe_decode.cuh" { … } }`:
//! helpers only some files share), so shared helpers live once.

use crate::runtime::{Arg, DevPtr};

/// The real model's widths (Qwen3.6-35B-A3B's config.json): the one place they are written.
/// Kernels rely on them (each becomes a `#define` of the same name in every kernel file); the CUDA
/// backend refuses checkpoints with other widths (`weights::check_real_widths`).
pub mod widths {
    pub const HIDDEN: usize = 2048;
    pub const VOCAB: usize = 248_320;
    pub const ATTN_HEADS: usize = 16;
    pub const KV_HEADS: usize = 2;
    pub const HEAD_DIM: usize = 256;
    pub const ROTARY_DIM: usize = 64;
    pub const GDN_K_HEADS: usize = 16;
    pub const GDN_V_HEADS: usize = 32;
    pub const GDN_HEAD_DIM: usize = 128;
    /// The GDN conv's channels: [q | k | v] = 2 · 16 · 128 + 32 · 128.
    pub const GDN_CONV_DIM: usize = 2 * GDN_K_HEADS * GDN_HEAD_DIM + GDN_V_HEADS * GDN_HEAD_DIM;
    pub const GDN_KERNEL: usize = 4;
    pub const EXPERTS: usize = 256;
    pub const TOP_K: usize = 8;
    pub const EXPERT_DIM: usize = 512;

    /// Every width by its `#define` name.
    pub const ALL: &[(&str, usize)] = &[
        ("HIDDEN", HIDDEN),
        ("VOCAB", VOCAB),
        ("ATTN_HEADS", ATTN_HEADS),
        ("KV_HEADS", KV_HEADS),
        ("HEAD_DIM", HEAD_DIM),
        ("ROTARY_DIM", ROTARY_DIM),
        ("GDN_K_HEADS", GDN_K_HEADS),
        ("GDN_V_HEADS", GDN_V_HEADS),
        ("GDN_HEAD_DIM", GDN_HEAD_DIM),
        ("GDN_CONV_DIM", GDN_CONV_DIM),
        ("GDN_KERNEL", GDN_KERNEL),
        ("EXPERTS", EXPERTS),
        ("TOP_K", TOP_K),
        ("EXPERT_DIM", EXPERT_DIM),
    ];
}

/// One kernel file and the kernels it defines.
pub struct Source {
    pub file: &'static str,
    pub text: &'static str,
    /// Headers it shares with other kernel files (device functions only; name, text), compiled
    /// before it in this order.
    pub headers: &'static [(&'static str, &'static str)],
    pub kernels: &'static [Signature],
}

/// A kernel's name and its parameters (name, Rust type) as its launcher declares them.
pub struct Signature {
    pub name: &'static str,
    pub params: &'static [(&'static str, &'static str)],
}

const COMMON: &str = include_str!("common.cuh");

impl Source {
    /// The text NVRTC compiles: the widths, the common header, its own headers, then the file.
    pub fn full_text(&self) -> String {
        let widths: String = widths::ALL.iter().map(|(name, v)| format!("#define {name} {v}\n")).collect();
        let headers: String = self.headers.iter().map(|(name, text)| format!("#line 1 \"{name}\"\n{text}\n")).collect();
        format!("{widths}#line 1 \"common.cuh\"\n{COMMON}\n{headers}#line 1 \"{}\"\n{}", self.file, self.text)
    }

    /// FNV-1a of the full text: the compile-cache key.
    pub fn hash(&self) -> u64 {
        self.full_text().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
    }

    pub fn functions(&self) -> impl Iterator<Item = &'static str> {
        self.kernels.iter().map(|k| k.name)
    }
}

/// Grid, block and dynamic shared memory of one launch, and whether it uses programmatic
/// dependent launch (`Gpu::launch`).
#[derive(Clone, Copy, Debug)]
pub struct Launch {
    pub grid: (u32, u32, u32),
    pub block: u32,
    pub shared_bytes: u32,
    pub pdl: bool,
}

impl Launch {
    pub fn new(grid: (u32, u32, u32), block: u32, shared_bytes: u32) -> Self {
        Launch { grid, block, shared_bytes, pdl: false }
    }

    /// With programmatic dependent launch when `on` (see `Gpu::launch`).
    pub fn pdl(self, on: bool) -> Self {
        Launch { pdl: on, ..self }
    }
}

/// A launcher parameter's value as a kernel argument. A device pointer is a `DevPtr`;
/// `Option<DevPtr>` is a pointer the kernel accepts as null for "none".
pub trait KernelArg {
    fn arg(self) -> Arg;
}

impl KernelArg for DevPtr {
    fn arg(self) -> Arg {
        Arg::Ptr(self)
    }
}
impl KernelArg for Option<DevPtr> {
    fn arg(self) -> Arg {
        Arg::Ptr(self.unwrap_or(0))
    }
}
impl KernelArg for i32 {
    fn arg(self) -> Arg {
        Arg::I32(self)
    }
}
impl KernelArg for i64 {
    fn arg(self) -> Arg {
        Arg::I64(self)
    }
}
impl KernelArg for f32 {
    fn arg(self) -> Arg {
        Arg::F32(self)
    }
}

/// `u64` scalars (a seed) are declared `Seed`: `DevPtr` is also a `u64`, and the signature check
/// tells pointers from integers by the declared type's name.
pub type Seed = u64;

/// Declares one `.cu` file's kernels: `kernel_file! { pub mod norm_cu = "norm.cu" { fn k(a: DevPtr, n: i32); } }`
/// makes module `norm_cu` with the file's `SOURCE` and a launcher `k(gpu, launch, a, n)` per
/// kernel. Parameter types: `DevPtr` (any `T*`), `Option<DevPtr>` (a `T*` that may be null),
/// `i32` (`int`), `i64` (`long long`), `Seed` (`unsigned long long`), `f32` (`float`).
macro_rules! kernel_file {
    ($(#[$doc:meta])* pub mod $module:ident = $file:literal { $(fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)* }) => {
        $crate::kernels::kernel_file! { $(#[$doc])* pub mod $module = $file, headers [] { $(fn $name($($arg: $ty),*);)* } }
    };
    ($(#[$doc:meta])* pub mod $module:ident = $file:literal with $($header:literal),+ { $(fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)* }) => {
        $crate::kernels::kernel_file! { $(#[$doc])* pub mod $module = $file, headers [$(($header, include_str!($header))),+] { $(fn $name($($arg: $ty),*);)* } }
    };
    ($(#[$doc:meta])* pub mod $module:ident = $file:literal, headers [$($header:expr),*] { $(fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)* }) => {
        $(#[$doc])*
        pub mod $module {
            #[allow(unused_imports)]
            use $crate::{kernels::{KernelArg, Launch, Seed}, runtime::{DevPtr, Gpu}};

            pub const SOURCE: $crate::kernels::Source = $crate::kernels::Source {
                file: $file,
                text: include_str!($file),
                headers: &[$($header),*],
                kernels: &[$($crate::kernels::Signature {
                    name: stringify!($name),
                    params: &[$((stringify!($arg), stringify!($ty))),*],
                }),*],
            };

            $(
                #[allow(clippy::too_many_arguments)]
                pub fn $name(gpu: &Gpu, launch: Launch, $($arg: $ty),*) -> anyhow::Result<()> {
                    gpu.launch(stringify!($name), launch, &[$(KernelArg::arg($arg)),*])
                }
            )*
        }
    };
}
pub(crate) use kernel_file;

/// Every kernel file; `Gpu::new` compiles them all, the CI test checks each compiles.
pub const SOURCES: &[Source] = &[
    crate::ops::norm::norm_cu::SOURCE,
    crate::ops::linear::gemv_cu::SOURCE,
    crate::ops::linear::cast_cu::SOURCE,
    crate::ops::linear::gemv_fp8_cu::SOURCE,
    crate::ops::linear::gemv_mma_cu::SOURCE,
    crate::ops::gemv_q::gemv_q_cu::SOURCE,
    crate::ops::lm_head::lm_head_cu::SOURCE,
    crate::ops::lora::lora_cu::SOURCE,
    crate::ops::embed::embed_cu::SOURCE,
    crate::ops::sample::argmax_cu::SOURCE,
    crate::ops::sample::sample_topk_cu::SOURCE,
    crate::ops::gdn::gdn_conv_cu::SOURCE,
    crate::ops::gdn::gdn_delta_cu::SOURCE,
    crate::ops::attention::attention_rope_cu::SOURCE,
    crate::ops::attention::attention_cu::SOURCE,
    crate::ops::moe::moe_router_cu::SOURCE,
    crate::ops::moe::moe_experts_cu::SOURCE,
    crate::ops::moe::moe_decode_cu::SOURCE,
    crate::ops::moe::moe_decode_fp8_cu::SOURCE,
    crate::ops::moe::moe_gemv_q_cu::SOURCE,
    crate::ops::vision::vision_cu::SOURCE,
    crate::synthetic::synthetic_cu::SOURCE,
    crate::profile::profile_cu::SOURCE,
];

#[cfg(test)]
/// The `extern "C" __global__` kernels of a `.cu` text: name and parameters (name, C type without
/// `const` and `__restrict__`, e.g. `float *`, `int`).
pub fn cuda_signatures(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("extern \"C\" __global__ void") {
        rest = &rest[at + "extern \"C\" __global__ void".len()..];
        let mut s = rest.trim_start();
        // attributes: __launch_bounds__(…), __cluster_dims__(…), or one macro naming them
        // (an upper-case word: GDN_STEP_SHAPE)
        loop {
            if s.starts_with("__") {
                let open = s.find('(').unwrap_or(0);
                s = s[close_paren(s, open) + 1..].trim_start();
            } else if let Some((_, after)) = s
                .split_once(char::is_whitespace)
                .filter(|(w, _)| w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            {
                s = after.trim_start();
            } else {
                break;
            }
        }
        let open = s.find('(').expect("a kernel's parameter list");
        let name = s[..open].trim().to_string();
        let params = s[open + 1..close_paren(s, open)]
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                let spaced = p.replace('*', " * ");
                let words: Vec<&str> =
                    spaced.split_whitespace().filter(|w| *w != "const" && *w != "__restrict__").collect();
                let (pname, ty) = words.split_last().expect("a named parameter");
                (pname.to_string(), ty.join(" "))
            })
            .collect();
        out.push((name, params));
    }
    out
}

#[cfg(test)]
/// The index of the `)` that closes the `(` at `open`.
fn close_paren(s: &str, open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in s.char_indices().skip(open) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parentheses")
}

#[cfg(test)]
/// The launcher's Rust type for a C parameter type.
fn rust_type(c: &str) -> &'static str {
    match c {
        _ if c.ends_with('*') => "DevPtr",
        "int" => "i32",
        "long long" | "int64_t" => "i64",
        "unsigned long long" | "uint64_t" => "Seed",
        "float" => "f32",
        _ => "unsupported",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kernel's launcher declares the parameters of its `extern "C" __global__` definition:
    /// the same kernels, the same parameter names (C `T` is Rust `t`), in the same order, of
    /// matching types. A kernel changed on one side only fails here, on the CPU.
    #[test]
    fn launchers_match_the_cuda_signatures() {
        let mut problems = Vec::new();
        for source in SOURCES {
            let cuda = cuda_signatures(source.text);
            let declared: Vec<&str> = source.functions().collect();
            let defined: Vec<&str> = cuda.iter().map(|(n, _)| n.as_str()).collect();
            if declared != defined {
                problems.push(format!("{}: launchers {declared:?}, kernels {defined:?}", source.file));
                continue;
            }
            for (k, (name, params)) in source.kernels.iter().zip(&cuda) {
                let want: Vec<(String, &str)> = params.iter().map(|(n, t)| (n.to_lowercase(), rust_type(t))).collect();
                let have: Vec<(String, &str)> = k
                    .params
                    .iter()
                    .map(|(n, t)| (n.to_string(), if t.replace(' ', "") == "Option<DevPtr>" { "DevPtr" } else { t }))
                    .collect();
                if want != have {
                    problems.push(format!("{}: {name}: the launcher has {have:?}, the kernel {want:?}", source.file));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// The parser reads the declarations the kernel files use (attributes, pointers, two-word types).
    #[test]
    fn cuda_signatures_parse() {
        let text = "extern \"C\" __global__ void __cluster_dims__(4, 1, 1) __launch_bounds__(128)\n\
                    k(const float* __restrict__ a, long long n, unsigned char *q) {}\n\
                    extern \"C\" __global__ void g(int T) {}\n\
                    extern \"C\" __global__ void SHAPE_2\nm(int T) {}";
        let sigs = cuda_signatures(text);
        let s = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(sigs[0], ("k".to_string(), s(&[("a", "float *"), ("n", "long long"), ("q", "unsigned char *")])));
        assert_eq!(sigs[1], ("g".to_string(), s(&[("T", "int")])));
        assert_eq!(sigs[2], ("m".to_string(), s(&[("T", "int")])));
        assert_eq!(sigs.len(), 3);
    }

    /// common.cuh defines no model width itself (they come from `widths`, once).
    #[test]
    fn widths_are_defined_only_in_rust() {
        for (name, _) in widths::ALL {
            assert!(!COMMON.contains(&format!("#define {name} ")), "common.cuh defines {name}; it belongs in widths");
            for source in SOURCES {
                assert!(!source.text.contains(&format!("#define {name} ")), "{} defines {name}", source.file);
                for (header, text) in source.headers {
                    assert!(!text.contains(&format!("#define {name} ")), "{header} defines {name}");
                }
            }
        }
    }

    /// The architectures CI compiles and assembles every kernel file for: one of each family
    /// `runtime::ARCHES` holds (sm_87, sm_103a and sm_121 take the same forms as sm_86, sm_100a
    /// and sm_120).
    const TESTED_ARCHES: &[&str] = &["sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120"];

    /// The PTX of every kernel file for every tested architecture, compiled once per test binary
    /// (both tests below read it), the files side by side.
    /// (architecture, file, its PTX or the compile error)
    type Compiled = (&'static str, &'static str, Result<String, String>);

    fn all_ptx() -> &'static Vec<Compiled> {
        static PTX: std::sync::OnceLock<Vec<Compiled>> = std::sync::OnceLock::new();
        PTX.get_or_init(|| {
            assert!(
                // SAFETY: only probes whether the shared library can be opened.
                unsafe { cudarc::nvrtc::sys::is_culib_present() },
                "libnvrtc not found: run .ci/run, or `pip install nvidia-cuda-nvrtc==13.0.* nvidia-cuda-runtime==13.0.*` \
                 and set LD_LIBRARY_PATH=<site-packages>/nvidia/cu13/lib SOLO_CUDA_INCLUDE=<site-packages>/nvidia/cu13/include"
            );
            assert!(TESTED_ARCHES.iter().all(|a| crate::runtime::ARCHES.contains(a)));
            let jobs: Vec<(&'static str, &'static Source)> =
                TESTED_ARCHES.iter().flat_map(|&arch| SOURCES.iter().map(move |source| (arch, source))).collect();
            // as many compiles at once as there are cores (each NVRTC takes a few hundred MB)
            let next = std::sync::atomic::AtomicUsize::new(0);
            let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
            let mut done: Vec<(usize, Compiled)> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..workers)
                    .map(|_| {
                        scope.spawn(|| {
                            let mut mine = Vec::new();
                            loop {
                                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(&(arch, source)) = jobs.get(i) else { break mine };
                                let ptx = crate::runtime::compile(source, arch).map_err(|e| format!("{e:#}"));
                                mine.push((i, (arch, source.file, ptx)));
                            }
                        })
                    })
                    .collect();
                handles.into_iter().flat_map(|h| h.join().expect("a compile panicked")).collect()
            });
            done.sort_by_key(|(i, _)| *i);
            done.into_iter().map(|(_, r)| r).collect()
        })
    }

    /// Every kernel file compiles with NVRTC for every architecture, and its PTX has every kernel
    /// its launchers name. Needs libnvrtc and the CUDA headers (`.ci/run` installs the pip wheels
    /// and points LD_LIBRARY_PATH / SOLO_CUDA_INCLUDE at them); without them this test fails
    /// rather than skips, so CI can never pass with uncompiled kernels.
    #[test]
    fn kernels_compile_with_nvrtc() {
        let mut failures = Vec::new();
        for (arch, file, ptx) in all_ptx() {
            match ptx {
                Ok(ptx) => {
                    let source = SOURCES.iter().find(|s| s.file == *file).unwrap();
                    for f in source.functions() {
                        assert!(ptx.contains(&format!(".entry {f}(")), "{file} ({arch}): no kernel `{f}` in the PTX");
                    }
                    // The portable forms use no Hopper instruction (a PTX of an older target
                    // would not assemble with one, below; this names the file at once).
                    if !arch.starts_with("sm_9") && !arch.starts_with("sm_1") {
                        for hopper in
                            ["griddepcontrol", "cp.async.bulk", "barrier.cluster", "mapa.", "red.global.add.v4"]
                        {
                            assert!(!ptx.contains(hopper), "{file} ({arch}): `{hopper}` in a portable form");
                        }
                    }
                }
                Err(e) => failures.push(e.clone()),
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }

    /// Every kernel's PTX also assembles (`ptxas -arch=…`) for every architecture: inline PTX
    /// and arch-specific instructions fail there, not in NVRTC. ptxas: `$SOLO_PTXAS`, else beside the
    /// headers (`$SOLO_CUDA_INCLUDE/../bin/ptxas`, the `nvidia-cuda-nvcc` wheel scripts/test
    /// installs), else a CUDA toolkit's (`/usr/local/cuda/bin`, `$PATH`: the GPU machine).
    #[test]
    fn kernels_assemble_with_ptxas() {
        use std::path::PathBuf;
        let include = std::env::var("SOLO_CUDA_INCLUDE").unwrap_or_else(|_| "/usr/local/cuda/include".into());
        let mut candidates: Vec<PathBuf> = std::env::var("SOLO_PTXAS").map(PathBuf::from).into_iter().collect();
        candidates.push(PathBuf::from(include).join("../bin/ptxas"));
        candidates.push(PathBuf::from("/usr/local/cuda/bin/ptxas"));
        let path = std::env::var_os("PATH").unwrap_or_default();
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("ptxas")));
        let ptxas = candidates.iter().find(|p| p.is_file()).unwrap_or_else(|| {
            panic!(
                "ptxas not found (looked at $SOLO_PTXAS, $SOLO_CUDA_INCLUDE/../bin, /usr/local/cuda/bin, $PATH): \
                 run scripts/test (it installs the nvidia-cuda-nvcc wheel) or set SOLO_PTXAS"
            )
        });
        let dir = std::env::temp_dir().join(format!("solo-ptxas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut failures = Vec::new();
        for (arch, file, ptx) in all_ptx() {
            let ptx = ptx.as_ref().unwrap_or_else(|e| panic!("{e}"));
            let path = dir.join(format!("{}-{arch}.ptx", file.trim_end_matches(".cu")));
            std::fs::write(&path, ptx).unwrap();
            let out = std::process::Command::new(ptxas)
                .arg(format!("-arch={arch}"))
                .args(["-o", "/dev/null"])
                .arg(&path)
                .output()
                .unwrap();
            if !out.status.success() {
                failures.push(format!("{file} ({arch}): {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
