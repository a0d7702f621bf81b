//! Every `.cu` file solo compiles, embedded in the binary.
//!
//! Each file sits next to the Rust module that launches it (`ops/*.rs`). `common.cuh` is pasted
//! in front of every file (NVRTC here gets no in-memory headers), so shared helpers live once.

/// One kernel file and the `extern "C"` functions it defines.
pub struct Source {
    pub file: &'static str,
    pub text: &'static str,
    pub functions: &'static [&'static str],
}

const COMMON: &str = include_str!("common.cuh");

impl Source {
    /// The text NVRTC compiles: the common header, then the file.
    pub fn full_text(&self) -> String {
        format!("{COMMON}\n#line 1 \"{}\"\n{}", self.file, self.text)
    }

    /// FNV-1a of the full text: the compile-cache key.
    pub fn hash(&self) -> u64 {
        self.full_text().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
    }
}

/// Every kernel file; `Gpu::new` compiles them all, the CI test checks each compiles.
pub const SOURCES: &[Source] = &[
    crate::ops::norm::SOURCE,
    crate::ops::linear::SOURCE,
    crate::ops::linear::SOURCE_CAST,
    crate::ops::linear::SOURCE_FP8,
    crate::ops::lm_head::SOURCE,
    crate::ops::embed::SOURCE,
    crate::ops::sample::SOURCE,
    crate::ops::sample::SOURCE_TOPK,
    crate::ops::gdn::SOURCE_CONV,
    crate::ops::gdn::SOURCE_DELTA,
    crate::ops::attention::SOURCE_ROPE,
    crate::ops::attention::SOURCE_ATTEND,
    crate::ops::moe::SOURCE_ROUTER,
    crate::ops::moe::SOURCE_EXPERTS,
    crate::ops::moe::SOURCE_DECODE,
    crate::synthetic::SOURCE,
    crate::profile::SOURCE,
];

#[cfg(test)]
mod tests {
    use super::SOURCES;

    /// Every kernel file compiles with NVRTC for sm_90a. Needs libnvrtc and the CUDA headers
    /// (`.ci/run` installs the pip wheels and points LD_LIBRARY_PATH / SOLO_CUDA_INCLUDE at them);
    /// without them this test fails rather than skips, so CI can never pass with uncompiled kernels.
    #[test]
    fn kernels_compile_with_nvrtc() {
        assert!(
// SAFETY: only probes whether the shared library can be opened.
            unsafe { cudarc::nvrtc::sys::is_culib_present() },
            "libnvrtc not found: run .ci/run, or `pip install nvidia-cuda-nvrtc==13.0.* nvidia-cuda-runtime==13.0.*` \
             and set LD_LIBRARY_PATH=<site-packages>/nvidia/cu13/lib SOLO_CUDA_INCLUDE=<site-packages>/nvidia/cu13/include"
        );
        let mut failures = Vec::new();
        for source in SOURCES {
            match crate::runtime::compile(source) {
                Ok(ptx) => {
                    for f in source.functions {
                        assert!(ptx.contains(&format!(".entry {f}(")), "{}: no kernel `{f}` in the PTX", source.file);
                    }
                    eprintln!("{}: ok ({} bytes of PTX)", source.file, ptx.len());
                }
                Err(e) => failures.push(format!("{e:#}")),
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }
}
