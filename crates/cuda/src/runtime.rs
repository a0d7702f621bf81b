//! The GPU runtime: one device, one stream that owns the model, our kernels compiled by NVRTC.
//!
//! Kernels are `.cu` files embedded in the binary (see `kernels::SOURCES`), compiled at start-up
//! for the device's own architecture (`Target`: sm_80 … sm_120, Hopper's `sm_90a` with its
//! arch-specific instructions) and cached on disk by source hash and architecture. Nothing here
//! links CUDA at build time: libcuda, libnvrtc and libcublas are opened at run time, so the binary
//! builds and runs on machines without them and `--backend cuda` fails there with a one-line
//! error.
//!
//! Buffers are plain device allocations addressed by raw pointers (`DevicePtr`), so a view into a
//! buffer (an expert inside a fused tensor, one layer's KV cache) is just a pointer plus an offset.
//! cudarc's per-buffer event tracking is turned off: every launch goes to the one stream, in order,
//! which is also what CUDA-graph capture needs.

use crate::kernels::{self, Launch};
use anyhow::{anyhow, bail, ensure, Context, Result};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A device address (what a kernel receives as `T*`).
pub type DevPtr = u64;

/// One kernel argument.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    Ptr(DevPtr),
    I32(i32),
    I64(i64),
    U64(u64),
    F32(f32),
}

/// An owned device allocation.
pub struct DevBuf {
    mem: CudaSlice<u8>,
    pub bytes: usize,
    /// The budget's count this allocation is charged to (`Gpu::alloc`), given back on drop.
    charged: Arc<AtomicUsize>,
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        self.charged.fetch_sub(self.bytes.max(1), Ordering::Relaxed);
    }
}

impl DevBuf {
    pub fn ptr(&self) -> DevPtr {
        let (ptr, _sync) = self.mem.device_ptr(self.mem.stream());
        ptr
    }
}

pub struct Gpu {
    /// Page-locked host memory that downloads go through, grown to the largest one (first: it is
    /// freed before the context).
    staging: std::sync::Mutex<PinnedStaging>,
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    functions: HashMap<&'static str, CudaFunction>,
    /// Kernels whose dynamic shared-memory limit was already raised past 48 KB, and to what.
    shared_limits: std::sync::Mutex<HashMap<&'static str, u32>>,
    /// cuBLAS on the model's stream (prefill matrix products).
    pub blas: CudaBlas,
    pub name: String,
    /// Streaming multiprocessors the launches size their grids for (the streaming decode GEMVs
    /// run two blocks on each): the device's, or fewer with `--sm-limit`.
    pub sms: u32,
    /// What the kernels were compiled for and what launches may use.
    pub target: Target,
    /// `--gpu-memory`: the bytes this process may hold on the GPU, if capped (`alloc` refuses
    /// past it), and what it holds: the context, cuBLAS and the modules as measured at start,
    /// plus every live `DevBuf`.
    pub budget: Option<usize>,
    charged: Arc<AtomicUsize>,
    /// The kernels launched with programmatic dependent launch (PDL, `launch_early`) so far, for
    /// `solo bench`'s header. With PDL a kernel may be scheduled while the one before it drains,
    /// and waits for it with `griddepcontrol.wait` (`pdl_wait()` in common.cuh) before it reads
    /// anything that kernel wrote. Three kernels use it: the GDN step, the decode attention and
    /// the decode step's MoE kernel; for every other kernel the H200's decode step measured
    /// 1–15 % slower with it (bench/RESULTS.md).
    pdl_launched: std::sync::Mutex<std::collections::BTreeSet<&'static str>>,
    /// While `Some`, every launch records a CUDA event after itself, tagged with the kernel's
    /// name (`profile::profile_launches`).
    recorder: std::sync::Mutex<Option<Vec<(String, CudaEvent)>>>,
}

impl Gpu {
    /// Opens device 0 and compiles every kernel. Fails with one clear line when there is no driver,
    /// no GPU, no NVRTC or a kernel that does not compile.
    pub fn new() -> Result<Self> {
        // SAFETY: only probes whether the shared libraries can be opened.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            bail!("no CUDA driver library (libcuda.so): --backend cuda needs an NVIDIA GPU and its driver");
        }
        require_nvrtc()?;
        // SAFETY: as above, for cuBLAS.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            bail!("no cuBLAS library (libcublas.so, CUDA 13): install the CUDA toolkit");
        }
        let count = CudaContext::device_count().map_err(|e| anyhow!("CUDA driver: {e:?}"))?;
        if count < 1 {
            bail!("the CUDA driver sees no GPU");
        }
        let ctx = CudaContext::new(0).map_err(|e| anyhow!("cannot open GPU 0: {e:?}"))?;
        // One stream, strictly ordered: no per-buffer events (they would also break graph capture).
        // SAFETY: called before any buffer or stream exists, so no event is pending; every later
        // use is on the one stream, which orders it.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(|e| anyhow!("cannot create a CUDA stream: {e:?}"))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let (major, minor) = ctx.compute_capability().map_err(|e| anyhow!("{e:?}"))?;
        let attribute = |a| ctx.attribute(a).map_err(|e| anyhow!("{e:?}"));
        use cudarc::driver::sys::CUdevice_attribute as A;
        let device_shared = attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32;
        let device_sms = attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let options = gpu_options();
        let target = Target::for_device(&name, (major as u32, minor as u32), device_shared, options.portable)?;
        let sms = options.sm_limit.map_or(device_sms, |limit| limit.clamp(1, device_sms));
        let ptxs = compile_all(kernels::SOURCES, target.arch, cache_dir().as_deref());
        let mut functions = HashMap::new();
        for (source, ptx) in kernels::SOURCES.iter().zip(ptxs) {
            let ptx = ptx?;
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
                .map_err(|e| anyhow!("kernel file {}: cannot load module: {e:?}", source.file))?;
            for f in source.functions() {
                let func = module
                    .load_function(f)
                    .map_err(|e| anyhow!("kernel file {}: no function `{f}`: {e:?}", source.file))?;
                functions.insert(f, func);
            }
        }
        let blas = CudaBlas::new(stream.clone()).map_err(|e| anyhow!("cannot start cuBLAS: {e:?}"))?;
        // What the process holds before its first allocation (context, modules, cuBLAS), charged
        // to the budget; other processes' memory on the card is counted in too (conservative).
        let (free, total) = ctx.mem_get_info().map_err(|e| anyhow!("{e:?}"))?;
        if let Some(budget) = options.gpu_memory {
            ensure!(
                budget <= total,
                "--gpu-memory {:.1} GiB is more than {name} has ({:.1} GiB)",
                gib(budget),
                gib(total)
            );
        }
        Ok(Gpu {
            ctx,
            stream,
            functions,
            shared_limits: Default::default(),
            blas,
            staging: std::sync::Mutex::new(PinnedStaging { ptr: std::ptr::null_mut(), bytes: 0 }),
            name,
            sms,
            target,
            budget: options.gpu_memory,
            charged: Arc::new(AtomicUsize::new(total - free)),
            pdl_launched: Default::default(),
            recorder: Default::default(),
        })
    }

    /// A zeroed device allocation of `bytes` bytes; fails (one line, no allocation) past the
    /// `--gpu-memory` budget.
    pub fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        let charge = bytes.max(1);
        let before = self.charged.fetch_add(charge, Ordering::Relaxed);
        if let Some(budget) = self.budget {
            if before + charge > budget {
                self.charged.fetch_sub(charge, Ordering::Relaxed);
                bail!(
                    "GPU memory budget: {} MiB more would pass --gpu-memory {:.1} GiB ({:.2} GiB in use)",
                    charge >> 20,
                    gib(budget),
                    gib(before)
                );
            }
        }
        let mem = self.stream.alloc_zeros::<u8>(charge).map_err(|e| {
            self.charged.fetch_sub(charge, Ordering::Relaxed);
            anyhow!("GPU out of memory allocating {} MiB: {e:?}", bytes >> 20)
        })?;
        Ok(DevBuf { mem, bytes, charged: self.charged.clone() })
    }

    /// Bytes this process holds on the GPU as the budget counts them (see `budget`).
    pub fn charged(&self) -> usize {
        self.charged.load(Ordering::Relaxed)
    }

    /// Bytes left under the budget (None: no budget).
    pub fn budget_left(&self) -> Option<usize> {
        self.budget.map(|b| b.saturating_sub(self.charged()))
    }

    /// Copies host bytes into a new device allocation (`write`).
    pub fn upload(&self, data: &[u8]) -> Result<DevBuf> {
        let buf = self.alloc(data.len())?;
        self.write(buf.ptr(), data)?;
        Ok(buf)
    }

    pub fn upload_f32(&self, data: &[f32]) -> Result<DevBuf> {
        self.upload(f32_bytes(data))
    }

    pub fn upload_i32(&self, data: &[i32]) -> Result<DevBuf> {
        self.upload(&data.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// Copies host bytes to `ptr` on the model's stream and waits for the copy. From STAGED_WRITE
    /// bytes on, through the pinned staging buffer, STAGING_CHUNK bytes at a time: a copy from
    /// pageable memory ran at ~1.4 GB/s on the H200 machine (RESULTS "Loading"), which an
    /// image's patches (12.6 MB at 1024×1024) and its tokens' embeddings (8 MB) paid in full.
    pub fn write(&self, ptr: DevPtr, data: &[u8]) -> Result<()> {
        if data.len() < STAGED_WRITE {
            // SAFETY: `data` is borrowed until `sync()` below has waited for the copy; `ptr` is
            // the caller's device allocation of at least `data.len()` bytes.
            unsafe { cudarc::driver::result::memcpy_htod_async(ptr, data, self.stream.cu_stream()) }
                .map_err(|e| anyhow!("upload: {e:?}"))?;
            return self.sync();
        }
        self.ctx.bind_to_thread().map_err(|e| anyhow!("upload: {e:?}"))?;
        let mut staging = self.staging.lock().map_err(|_| anyhow!("upload: staging buffer poisoned"))?;
        let pinned = staging.at_least(data.len().min(STAGING_CHUNK))?;
        for (i, chunk) in data.chunks(STAGING_CHUNK).enumerate() {
            // SAFETY: `pinned` is a page-locked host allocation of at least STAGING_CHUNK (or
            // data.len()) bytes that only this (locked) call uses, filled before the copy and not
            // touched again until `sync()` has waited for it; `ptr` is the caller's device
            // allocation of at least `data.len()` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(chunk.as_ptr(), pinned, chunk.len());
                let src = std::slice::from_raw_parts(pinned as *const u8, chunk.len());
                cudarc::driver::result::memcpy_htod_async(
                    ptr + (i * STAGING_CHUNK) as DevPtr,
                    src,
                    self.stream.cu_stream(),
                )
                .map_err(|e| anyhow!("upload: {e:?}"))?;
            }
            self.sync()?;
        }
        Ok(())
    }

    /// Copies `n` values at `ptr` back to the host, through the pinned staging buffer
    /// STAGING_CHUNK bytes at a time (a copy into pageable memory measured ~1.5 ms a megabyte on
    /// the H200 machine; in pieces, the buffer stays 16 MiB whatever is read, a prompt's every
    /// logit included); synchronises the stream. `T` is a plain number type (its bytes are the
    /// device's, little-endian).
    fn download_values<T: Copy>(&self, ptr: DevPtr, n: usize) -> Result<Vec<T>> {
        let bytes = n * std::mem::size_of::<T>();
        let mut host: Vec<T> = Vec::with_capacity(n);
        self.ctx.bind_to_thread().map_err(|e| anyhow!("download: {e:?}"))?;
        let mut staging = self.staging.lock().map_err(|_| anyhow!("download: staging buffer poisoned"))?;
        let pinned = staging.at_least(bytes.min(STAGING_CHUNK))?;
        let out = host.as_mut_ptr() as *mut u8;
        for first in (0..bytes).step_by(STAGING_CHUNK) {
            let len = STAGING_CHUNK.min(bytes - first);
            // SAFETY: `pinned` is a page-locked host allocation of at least `len` bytes that only
            // this (locked) call uses; `ptr` is the caller's device allocation of at least `bytes`
            // bytes; the copy is ordered on the model's stream and complete after the
            // synchronisation; `host` has room for `bytes` bytes, distinct from `pinned`.
            unsafe {
                let dst = std::slice::from_raw_parts_mut(pinned, len);
                cudarc::driver::result::memcpy_dtoh_async(dst, ptr + first as DevPtr, self.stream.cu_stream())
                    .map_err(|e| anyhow!("download: {e:?}"))?;
                self.sync()?;
                std::ptr::copy_nonoverlapping(pinned, out.add(first), len);
            }
        }
        // SAFETY: all `bytes` bytes of `host`'s n values were written above (T is a plain number
        // type: any bytes are a value).
        unsafe { host.set_len(n) };
        Ok(host)
    }

    /// Copies `bytes` bytes at `ptr` back to the host (synchronises the stream).
    pub fn download(&self, ptr: DevPtr, bytes: usize) -> Result<Vec<u8>> {
        self.download_values(ptr, bytes)
    }

    pub fn download_f32(&self, ptr: DevPtr, n: usize) -> Result<Vec<f32>> {
        self.download_values(ptr, n)
    }

    pub fn download_i32(&self, ptr: DevPtr, n: usize) -> Result<Vec<i32>> {
        self.download_values(ptr, n)
    }

    /// Device-to-device copy on the model's stream.
    pub fn copy(&self, dst: DevPtr, src: DevPtr, bytes: usize) -> Result<()> {
        // SAFETY: device memory only, ordered on the model's stream; `dst` and `src` are the caller's
        // allocations of at least `bytes` bytes, which outlive the stream's work (buffers are freed
        // on the same stream).
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream()) }
            .map_err(|e| anyhow!("device copy: {e:?}"))
    }

    /// Sets `bytes` bytes at `ptr` to zero on the model's stream.
    pub fn zero(&self, ptr: DevPtr, bytes: usize) -> Result<()> {
        // SAFETY: device memory only, ordered on the model's stream; `ptr` is the caller's
        // allocation of at least `bytes` bytes.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0, bytes, self.stream.cu_stream()) }
            .map_err(|e| anyhow!("memset: {e:?}"))
    }

    /// Sets the i32 at `ptr` to `value` on the model's stream, without waiting (a memset: no
    /// host memory to keep alive, unlike `write`).
    pub fn set_i32(&self, ptr: DevPtr, value: i32) -> Result<()> {
        // SAFETY: device memory only, ordered on the model's stream; `ptr` is the caller's
        // allocation of at least 4 bytes.
        unsafe { cudarc::driver::sys::cuMemsetD32Async(ptr, value as u32, 1, self.stream.cu_stream()) }
            .result()
            .map_err(|e| anyhow!("memset: {e:?}"))
    }

    pub fn sync(&self) -> Result<()> {
        self.stream.synchronize().map_err(|e| anyhow!("CUDA error: {e:?}"))
    }

    /// Launches kernel `name` on the model's stream: called by the kernel's typed launcher
    /// (`kernels::kernel_file!`), which builds `args` from its declared parameters. With
    /// `launch.pdl`, programmatic dependent launch: for a kernel whose blocks request what the
    /// kernel before does not write (weights, state, old cache rows) before `pdl_wait()` and fit
    /// beside that kernel (`moe_decode_block`, `gdn_decode_step`, `attn_decode`).
    pub(crate) fn launch(&self, name: &str, launch: Launch, args: &[Arg]) -> Result<()> {
        let Launch { grid, block, shared_bytes, pdl } = launch;
        // PDL is a Hopper feature (and `pdl_wait()` compiles to nothing in the portable forms).
        let pdl_on = pdl && self.target.hopper;
        let (&name, func) = self.functions.get_key_value(name).with_context(|| format!("no kernel named `{name}`"))?;
        // Past the default 48 KB (static shared memory counts too), the kernel must opt in.
        if shared_bytes > 32 * 1024 {
            let mut limits = self.shared_limits.lock().unwrap_or_else(|e| e.into_inner());
            if limits.get(name).is_none_or(|&raised| raised < shared_bytes) {
                // The target's limit holds for static + dynamic shared memory (so the forms for
                // 99 KB are held to it on a bigger GPU too).
                let mut fixed = 0i32;
                // SAFETY: queries an attribute of a loaded function into a local.
                unsafe {
                    cudarc::driver::sys::cuFuncGetAttribute(
                        &mut fixed,
                        cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                        func.cu_function(),
                    )
                }
                .result()
                .map_err(|e| anyhow!("{name}: {e:?}"))?;
                ensure!(
                    shared_bytes + fixed as u32 <= self.target.max_shared,
                    "{name}: {} bytes of shared memory, past this target's {} (a launcher picked the wrong form)",
                    shared_bytes + fixed as u32,
                    self.target.max_shared
                );
                func.set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared_bytes as i32,
                )
                .map_err(|e| anyhow!("{name}: cannot raise shared memory to {shared_bytes}: {e:?}"))?;
                limits.insert(name, shared_bytes);
            }
        }
        if pdl_on {
            self.pdl_launched.lock().unwrap_or_else(|e| e.into_inner()).insert(name);
        }
        use cudarc::driver::sys;
        // Each kernel parameter is passed as a pointer to its value.
        let mut params: Vec<*mut std::ffi::c_void> = args
            .iter()
            .map(|a| match a {
                Arg::Ptr(v) | Arg::U64(v) => v as *const u64 as *mut _,
                Arg::I32(v) => v as *const i32 as *mut _,
                Arg::I64(v) => v as *const i64 as *mut _,
                Arg::F32(v) => v as *const f32 as *mut _,
            })
            .collect();
        let mut pdl = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            // SAFETY: the value is a C union of plain integers, for which all-zero bytes are valid.
            value: unsafe { std::mem::zeroed() },
        };
        pdl.value.programmaticStreamSerializationAllowed = 1;
        let cfg = sys::CUlaunchConfig {
            gridDimX: grid.0,
            gridDimY: grid.1,
            gridDimZ: grid.2,
            blockDimX: block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: shared_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut pdl,
            numAttrs: u32::from(pdl_on),
        };
        // SAFETY: `params` points at `args`' payloads, which outlive the call; `args` come from the
        // kernel's typed launcher, whose parameters the CI test checks against the .cu declaration.
        unsafe { sys::cuLaunchKernelEx(&cfg, func.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) }
            .result()
            .map_err(|e| anyhow!("launching {name}: {e:?}"))?;
        self.record_point(|| {
            // The integer arguments (row counts, widths) tell apart launches of one kernel on
            // different matrices.
            let ints: Vec<String> =
                args.iter().filter_map(|a| if let Arg::I32(v) = a { Some(v.to_string()) } else { None }).collect();
            format!("{name} <<<{}×{}×{}, {block}>>> ({})", grid.0, grid.1, grid.2, ints.join(", "))
        })
    }

    /// While launches are recorded (`record_launches`): an event after the work queued so far,
    /// labelled `label()` — each kernel launch's, and a library call's (cuBLAS) after it.
    pub(crate) fn record_point(&self, label: impl FnOnce() -> String) -> Result<()> {
        let mut recorder = self.recorder.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(events) = recorder.as_mut() {
            let event = self
                .stream
                .record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| anyhow!("CUDA event: {e:?}"))?;
            events.push((label(), event));
        }
        Ok(())
    }

    /// The kernels launched with PDL so far, by name.
    pub fn pdl_launched(&self) -> Vec<&'static str> {
        self.pdl_launched.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect()
    }

    /// Starts (`true`) or stops recording an event after every launch; stopping returns what
    /// was recorded: (kernel name and launch shape, event after it), in launch order.
    pub fn record_launches(&self, on: bool) -> Vec<(String, CudaEvent)> {
        let mut recorder = self.recorder.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *recorder, on.then(Vec::new)).unwrap_or_default()
    }
}

/// How the GPU is used: the device's own kernel forms, or (`portable`) the sm_80 forms under a
/// consumer card's limits (99 KB of shared memory a block); `sm_limit` sizes every grid for that
/// many SMs; `gpu_memory` caps what the process holds. Set once by the command line
/// (`configure`) before the GPU opens; otherwise from `SOLO_PORTABLE_KERNELS=1` and
/// `SOLO_SM_LIMIT=N` (the GPU test binary runs in both forms so).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuOptions {
    pub portable: bool,
    pub sm_limit: Option<u32>,
    /// `--gpu-memory`: the bytes of GPU memory this process may hold (`Gpu::budget`).
    pub gpu_memory: Option<usize>,
}

static GPU_OPTIONS: std::sync::OnceLock<GpuOptions> = std::sync::OnceLock::new();

/// Sets the options for every `Gpu` this process opens; fails if they were already fixed
/// (set before, or read by a `Gpu::new`) with other values.
pub fn configure(options: GpuOptions) -> Result<()> {
    let set = *GPU_OPTIONS.get_or_init(|| options);
    ensure!(set == options, "GPU options already fixed as {set:?}");
    Ok(())
}

/// `--gpu-memory`, if the command line set it (without fixing the options as `gpu_options` does).
pub(crate) fn configured_gpu_memory() -> Option<usize> {
    GPU_OPTIONS.get().and_then(|o| o.gpu_memory)
}

fn gpu_options() -> GpuOptions {
    *GPU_OPTIONS.get_or_init(|| GpuOptions {
        portable: std::env::var("SOLO_PORTABLE_KERNELS").is_ok_and(|v| v == "1"),
        sm_limit: std::env::var("SOLO_SM_LIMIT").ok().and_then(|v| v.parse().ok()),
        gpu_memory: None,
    })
}

/// A size as people write it: `24GiB`, `24G` (binary), `24GB` (decimal), `512MiB`, `1.5TiB`, or
/// plain bytes.
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("`{text}` is not a size (e.g. 24GiB, 512MiB)"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024f64.powi(2),
        "g" | "gib" => 1024f64.powi(3),
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => return Err(format!("`{text}`: unknown unit `{other}` (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)")),
    };
    Ok((value * scale) as usize)
}

fn gib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// Every architecture solo compiles for (the CI test compiles every kernel file for each).
pub const ARCHES: &[&str] = &["sm_80", "sm_86", "sm_87", "sm_89", "sm_90a", "sm_100a", "sm_103a", "sm_120", "sm_121"];

/// The shared memory a block may use on the consumer cards (sm_86, sm_89, sm_120: 99 KB); the
/// portable forms fit it.
pub const CONSUMER_SHARED: u32 = 99 * 1024;

/// What the kernels are compiled for: NVRTC's architecture, whether the Hopper forms (PDL,
/// thread-block clusters, bulk copies, vector reductions; sm_90 and later) are compiled in and
/// launched, and the dynamic shared memory a block may use, which picks the forms of the kernels
/// that have a smaller one.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub arch: &'static str,
    pub hopper: bool,
    pub max_shared: u32,
}

impl Target {
    /// The target for a device of compute capability `cc` with `shared` bytes of opt-in shared
    /// memory a block. `portable`: the sm_80 forms and at most `CONSUMER_SHARED`, on any device.
    pub fn for_device(name: &str, cc: (u32, u32), shared: u32, portable: bool) -> Result<Target> {
        let (major, minor) = cc;
        if major < 8 {
            bail!("{name} has compute capability {major}.{minor}; solo's kernels need sm_80 (Ampere) or newer");
        }
        if portable {
            return Ok(Target { arch: "sm_80", hopper: false, max_shared: shared.min(CONSUMER_SHARED) });
        }
        // The architectures with arch-specific ("a") instructions take that form.
        let arch = match (major, minor) {
            (8, 0) => "sm_80",
            (8, 6) => "sm_86",
            (8, 7) => "sm_87",
            (8, 9) => "sm_89",
            (9, 0) => "sm_90a",
            (10, 0) => "sm_100a",
            (10, 3) => "sm_103a",
            (12, 0) => "sm_120",
            (12, 1) => "sm_121",
            _ => bail!(
                "{name} has compute capability {major}.{minor}, which solo does not know; it compiles for {}",
                ARCHES.join(", ")
            ),
        };
        let target = Target { arch, hopper: major >= 9, max_shared: shared };
        let max_shared = if target.big_shared() { shared } else { shared.min(CONSUMER_SHARED) };
        Ok(Target { max_shared, ..target })
    }

    /// Whether the kernels take their big-shared-memory forms (227 KB a block: sm_90a, sm_100a,
    /// sm_103a; `SOLO_BIG_SHARED` in common.cuh decides the same at compile time); otherwise
    /// every launch fits the consumer cards' 99 KB.
    pub fn big_shared(&self) -> bool {
        matches!(self.arch, "sm_90a" | "sm_100a" | "sm_103a")
    }

    /// FP8 weights need sm_89's e4m3 instructions (FP8 tensor cores and conversions).
    pub fn check_fp8(&self, name: &str) -> Result<()> {
        ensure!(
            !matches!(self.arch, "sm_80" | "sm_86" | "sm_87"),
            "FP8 weights need an sm_89 or newer GPU (Ada, Hopper, Blackwell); {name} runs the {} forms: use a bf16 or 4-bit checkpoint",
            self.arch
        );
        Ok(())
    }

    /// One line for the start-up: the architecture, the forms, the shared memory.
    pub fn describe(&self) -> String {
        format!(
            "{}{}, {} KB of shared memory a block",
            self.arch,
            if self.hopper { "" } else { " (portable forms)" },
            self.max_shared / 1024
        )
    }
}

/// NVRTC options for every kernel, for `arch` (`sm_90a`: Hopper with its arch-specific
/// instructions).
fn compile_options(arch: &'static str) -> cudarc::nvrtc::CompileOptions {
    cudarc::nvrtc::CompileOptions {
        arch: Some(arch),
        include_paths: cuda_include_dirs(),
        options: vec!["--std=c++17".into(), "-default-device".into()],
        ..Default::default()
    }
}

/// Where `cuda_bf16.h` and friends are: `$SOLO_CUDA_INCLUDE`, `$CUDA_HOME/include`, or the usual
/// system location.
fn cuda_include_dirs() -> Vec<String> {
    let mut dirs = Vec::new();
    if let Ok(d) = std::env::var("SOLO_CUDA_INCLUDE") {
        dirs.push(d);
    }
    if let Ok(d) = std::env::var("CUDA_HOME") {
        dirs.push(format!("{d}/include"));
    }
    dirs.push("/usr/local/cuda/include".into());
    dirs
}

/// Compiles one kernel file with NVRTC for `arch` (`sm_90a`, `sm_80`, …); returns its PTX text.
pub fn compile(source: &kernels::Source, arch: &'static str) -> Result<String> {
    let text = source.full_text();
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(&text, compile_options(arch)).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => {
            anyhow!("kernel file {} does not compile for {arch}:\n{}", source.file, log.to_string_lossy())
        }
        other => anyhow!("kernel file {}: NVRTC failed: {other:?}", source.file),
    })?;
    Ok(ptx.to_src())
}

/// `compile_cached` of every file, side by side (NVRTC is thread-safe: a start with an empty
/// cache takes the longest file's time, not the sum).
fn compile_all(sources: &[kernels::Source], arch: &'static str, dir: Option<&Path>) -> Vec<Result<String>> {
    std::thread::scope(|scope| {
        let compiles: Vec<_> =
            sources.iter().map(|source| scope.spawn(move || compile_cached(source, arch, dir))).collect();
        compiles.into_iter().map(|c| c.join().unwrap_or_else(|_| Err(anyhow!("a kernel compile panicked")))).collect()
    })
}

/// Compiles every kernel file for `arch` (one of `ARCHES`) into the kernel cache, as a start on
/// a GPU of that architecture would, without a GPU (`solo kernels`): a GPU machine given the
/// cache then starts without compiling (scripts/gpu_run.sh unpacks one). Returns the cache's
/// directory.
pub fn fill_kernel_cache(arch: &str) -> Result<PathBuf> {
    let dir = cache_dir().ok_or_else(|| anyhow!("no kernel cache: set SOLO_CACHE (or HOME)"))?;
    fill_cache_in(kernels::SOURCES, arch, &dir)?;
    Ok(dir)
}

fn fill_cache_in(sources: &[kernels::Source], arch: &str, dir: &Path) -> Result<()> {
    let Some(&arch) = ARCHES.iter().find(|a| **a == arch) else {
        bail!("architecture {arch}: solo compiles for {}", ARCHES.join(", "))
    };
    require_nvrtc()?;
    // (compile_cached forgives a cache it cannot write; filling one must not)
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make the kernel cache {}", dir.display()))?;
    compile_all(sources, arch, Some(dir)).into_iter().collect::<Result<Vec<_>>>()?;
    for source in sources {
        let path = cache_path(dir, source, arch);
        ensure!(path.is_file(), "could not write {} (the kernel cache)", path.display());
    }
    Ok(())
}

/// NVRTC is there to compile the kernels, or one line says how to get it.
fn require_nvrtc() -> Result<()> {
    // SAFETY: only probes whether the shared library can be opened.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        bail!("no NVRTC library (libnvrtc.so, CUDA 13): install the CUDA toolkit or `pip install nvidia-cuda-nvrtc==13.0.*` and put its lib/ on LD_LIBRARY_PATH");
    }
    Ok(())
}

/// Where the kernel cache keeps a file's PTX for an architecture (by its source's hash).
fn cache_path(dir: &Path, source: &kernels::Source, arch: &str) -> PathBuf {
    dir.join(format!("{}-{arch}-{:016x}.ptx", source.file.trim_end_matches(".cu"), source.hash()))
}

/// `compile`, cached in `dir` (`$SOLO_CACHE/kernels`, or `~/.cache/solo/kernels`; none: not
/// cached) by source hash and architecture. A compile failure becomes one line naming the file
/// and its first error; the whole NVRTC log goes to `<dir>/<file>.log`.
fn compile_cached(source: &kernels::Source, arch: &'static str, dir: Option<&Path>) -> Result<String> {
    let path = dir.map(|d| cache_path(d, source, arch));
    if let Some(ptx) = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
        return Ok(ptx);
    }
    let ptx = compile(source, arch).map_err(|e| {
        let log = format!("{e:#}");
        let first = log.lines().find(|l| l.contains("error")).unwrap_or("see the log").trim().to_string();
        let saved = dir
            .map(|d| d.join(format!("{}.log", source.file)))
            .filter(|p| std::fs::create_dir_all(p.parent().unwrap()).and_then(|_| std::fs::write(p, &log)).is_ok());
        match saved {
            Some(p) => anyhow!("kernel file {} does not compile: {first} (full log: {})", source.file, p.display()),
            None => anyhow!("kernel file {} does not compile: {first}", source.file),
        }
    })?;
    if let Some(p) = path {
        // A cache that cannot be written only costs a recompile next time.
        let _ = std::fs::create_dir_all(p.parent().unwrap()).and_then(|_| std::fs::write(&p, &ptx));
    }
    Ok(ptx)
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("SOLO_CACHE") {
        return Some(PathBuf::from(d).join("kernels"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/solo/kernels"))
}

/// Captured CUDA graphs by key (each with the buffers it was captured with baked in), least
/// recently used first, at most `capacity`: the decode step keeps one per sequence and step kind.
pub struct GraphCache<K> {
    graphs: std::cell::RefCell<Vec<(K, cudarc::driver::CudaGraph)>>,
    capacity: usize,
}

impl<K: PartialEq> GraphCache<K> {
    pub fn new(capacity: usize) -> Self {
        GraphCache { graphs: Default::default(), capacity }
    }

    /// Launches the graph of `key`, first capturing what `kernels` launches on the model's stream
    /// if there is none (everything they need must be allocated before: a capture cannot allocate).
    pub fn launch(&self, gpu: &Gpu, key: K, kernels: impl FnOnce() -> Result<()>) -> Result<()> {
        let mut graphs = self.graphs.borrow_mut();
        match graphs.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                let hit = graphs.remove(i);
                graphs.push(hit);
            }
            None => {
                if graphs.len() >= self.capacity {
                    graphs.remove(0);
                }
                gpu.sync()?;
                gpu.stream
                    .begin_capture(cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                    .map_err(|e| anyhow!("begin graph capture: {e:?}"))?;
                let captured = kernels();
                let graph = gpu
                    .stream
                    .end_capture(
                        cudarc::driver::sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
                    )
                    .map_err(|e| anyhow!("end graph capture: {e:?}"))?;
                captured?;
                graphs.push((key, graph.ok_or_else(|| anyhow!("graph capture produced no graph"))?));
            }
        }
        let (_, graph) = graphs.last().expect("pushed above");
        graph.launch().map_err(|e| anyhow!("graph launch: {e:?}"))
    }
}

/// The bytes of `values` as the device holds them (little-endian: the host's own, no copy).
pub fn f32_bytes(values: &[f32]) -> &[u8] {
    const _: () = assert!(cfg!(target_endian = "little"), "solo's CUDA backend runs on little-endian hosts");
    // SAFETY: f32 has no padding and any alignment of u8 is met; the view borrows `values`.
    unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values)) }
}

/// `Gpu::write`: copies from this many bytes on go through the pinned staging buffer; it and the
/// downloads move STAGING_CHUNK bytes at a time.
const STAGED_WRITE: usize = 1 << 20;
const STAGING_CHUNK: usize = 16 << 20;

/// A page-locked host buffer (`cuMemHostAlloc`), freed on drop.
struct PinnedStaging {
    ptr: *mut u8,
    bytes: usize,
}

// SAFETY: the buffer is plain host memory owned by this value; `Gpu` only touches it under its mutex.
unsafe impl Send for PinnedStaging {}

impl PinnedStaging {
    /// The buffer, grown (to a power of two, at least 1 MB) to hold `bytes` bytes.
    fn at_least(&mut self, bytes: usize) -> Result<*mut u8> {
        if bytes > self.bytes {
            self.free();
            let size = bytes.next_power_of_two().max(1 << 20);
            // SAFETY: a fresh page-locked allocation of `size` bytes (flags 0: portable defaults).
            let ptr = unsafe { cudarc::driver::result::malloc_host(size, 0) }
                .map_err(|e| anyhow!("cannot allocate {size} bytes of pinned host memory: {e:?}"))?;
            self.ptr = ptr as *mut u8;
            self.bytes = size;
        }
        Ok(self.ptr)
    }

    fn free(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: `ptr` came from `malloc_host` and is freed once (then set to null).
            let _ = unsafe { cudarc::driver::result::free_host(self.ptr as *mut std::ffi::c_void) };
            self.ptr = std::ptr::null_mut();
            self.bytes = 0;
        }
    }
}

impl Drop for PinnedStaging {
    fn drop(&mut self) {
        self.free();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `solo kernels`' cache: a file compiled for an architecture lands where a GPU of that
    /// architecture looks (`compile_cached` reads it back, not NVRTC: the file's text is what it
    /// returns); an architecture solo does not compile for, or a cache that cannot be written, is
    /// refused in one line.
    #[test]
    fn kernel_cache_fills_without_a_gpu() {
        let dir = std::env::temp_dir().join(format!("solo-kernel-cache-{}", std::process::id()));
        let cast = [crate::ops::linear::cast_cu::SOURCE];
        fill_cache_in(&cast, "sm_80", &dir).unwrap();
        let file = cache_path(&dir, &cast[0], "sm_80");
        assert_eq!(file, dir.join(format!("cast-sm_80-{:016x}.ptx", cast[0].hash())));
        let ptx = std::fs::read_to_string(&file).unwrap();
        assert!(ptx.contains(".entry cast_f32_to_bf16("), "{}", file.display());
        std::fs::write(&file, "// from the cache").unwrap();
        assert_eq!(compile_cached(&cast[0], "sm_80", Some(&dir)).unwrap(), "// from the cache");
        let err = fill_cache_in(&cast, "sm_75", &dir).unwrap_err().to_string();
        assert!(err.contains("sm_75") && err.contains("sm_90a"), "{err}");
        // a cache that cannot be made (a file where its directory would be) is an error, not a
        // silent recompile next time
        let blocked = file.join("kernels");
        let err = fill_cache_in(&cast, "sm_80", &blocked).unwrap_err().to_string();
        assert!(err.contains("kernel cache") && err.contains(&blocked.display().to_string()), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Each compute capability gets its own architecture; Hopper forms from sm_90 on, the big
    /// shared-memory forms only where a block may have 227 KB; --portable-kernels gives sm_80
    /// under 99 KB on any card; older cards and unknown ones get one line.
    #[test]
    fn target_follows_the_device() {
        let t = |cc, shared, portable| Target::for_device("GPU", cc, shared, portable);
        let h100 = t((9, 0), 232_448, false).unwrap();
        assert_eq!((h100.arch, h100.hopper, h100.big_shared(), h100.max_shared), ("sm_90a", true, true, 232_448));
        let rtx3090 = t((8, 6), 101_376, false).unwrap();
        assert_eq!((rtx3090.arch, rtx3090.hopper, rtx3090.big_shared()), ("sm_86", false, false));
        let rtx5090 = t((12, 0), 101_376, false).unwrap();
        assert_eq!((rtx5090.arch, rtx5090.hopper, rtx5090.big_shared()), ("sm_120", true, false));
        // an A100 has 163 KB a block; its forms are the 99 KB ones
        assert_eq!(t((8, 0), 166_912, false).unwrap().max_shared, CONSUMER_SHARED);
        let portable = t((9, 0), 232_448, true).unwrap();
        assert_eq!((portable.arch, portable.hopper, portable.max_shared), ("sm_80", false, CONSUMER_SHARED));
        assert!(t((7, 5), 65_536, false).unwrap_err().to_string().contains("sm_80 (Ampere) or newer"));
        assert!(t((11, 0), 101_376, false).unwrap_err().to_string().contains("does not know"));
        assert!(t((8, 6), 101_376, false).unwrap().check_fp8("RTX 3090").unwrap_err().to_string().contains("sm_89"));
        assert!(t((8, 9), 101_376, false).unwrap().check_fp8("RTX 4090").is_ok());
        assert!(portable.check_fp8("H100").is_err());
        for arch in ARCHES {
            assert!(
                [(8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (12, 0), (12, 1)].iter().any(|&cc| t(
                    cc, 101_376, false
                )
                .unwrap()
                .arch
                    == *arch),
                "{arch} is compiled for but no device maps to it"
            );
        }
    }

    #[test]
    fn sizes_parse_as_written() {
        assert_eq!(parse_bytes("24GiB"), Ok(24 << 30));
        assert_eq!(parse_bytes("24G"), Ok(24 << 30));
        assert_eq!(parse_bytes("24GB"), Ok(24_000_000_000));
        assert_eq!(parse_bytes("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("lots").unwrap_err().contains("not a size"));
        assert!(parse_bytes("24GX").unwrap_err().contains("unknown unit"));
    }
}
