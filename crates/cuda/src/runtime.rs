//! The GPU runtime: one device, one stream that owns the model, our kernels compiled by NVRTC.
//!
//! Kernels are `.cu` files embedded in the binary (see `kernels::SOURCES`), compiled at start-up
//! for `sm_90a` and cached on disk by source hash. Nothing here links CUDA at build time: libcuda,
//! libnvrtc and libcublas are opened at run time, so the binary builds and runs on machines
//! without them and `--backend cuda` fails there with a one-line error.
//!
//! Buffers are plain device allocations addressed by raw pointers (`DevicePtr`), so a view into a
//! buffer (an expert inside a fused tensor, one layer's KV cache) is just a pointer plus an offset.
//! cudarc's per-buffer event tracking is turned off: every launch goes to the one stream, in order,
//! which is also what CUDA-graph capture needs.

use crate::kernels::{self, Launch};
use anyhow::{anyhow, bail, Context, Result};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr};
use std::collections::HashMap;
use std::path::PathBuf;
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
    /// Streaming multiprocessors (the streaming decode GEMVs run two blocks on each).
    pub sms: u32,
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
        // SAFETY: as above, for NVRTC.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            bail!("no NVRTC library (libnvrtc.so, CUDA 13): install the CUDA toolkit or `pip install nvidia-cuda-nvrtc==13.0.*` and put its lib/ on LD_LIBRARY_PATH");
        }
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
        if (major, minor) != (9, 0) {
            bail!("{name} has compute capability {major}.{minor}; solo's kernels are built for sm_90a (H100/H200)");
        }
        // The files compile side by side (NVRTC is thread-safe; a start with an empty cache
        // takes the longest file's time, not the sum).
        let ptxs: Vec<Result<String>> = std::thread::scope(|scope| {
            let compiles: Vec<_> =
                kernels::SOURCES.iter().map(|source| scope.spawn(|| compile_cached(source))).collect();
            compiles
                .into_iter()
                .map(|c| c.join().unwrap_or_else(|_| Err(anyhow!("a kernel compile panicked"))))
                .collect()
        });
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
        let sms = ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| anyhow!("{e:?}"))? as u32;
        Ok(Gpu {
            ctx,
            stream,
            functions,
            shared_limits: Default::default(),
            blas,
            staging: std::sync::Mutex::new(PinnedStaging { ptr: std::ptr::null_mut(), bytes: 0 }),
            name,
            sms,
            pdl_launched: Default::default(),
            recorder: Default::default(),
        })
    }

    /// A zeroed device allocation of `bytes` bytes.
    pub fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        let mem = self
            .stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(|e| anyhow!("GPU out of memory allocating {} MiB: {e:?}", bytes >> 20))?;
        Ok(DevBuf { mem, bytes })
    }

    /// Copies host bytes into a new device allocation.
    pub fn upload(&self, data: &[u8]) -> Result<DevBuf> {
        let mut buf = self.alloc(data.len())?;
        self.stream.memcpy_htod(data, &mut buf.mem).map_err(|e| anyhow!("upload: {e:?}"))?;
        Ok(buf)
    }

    pub fn upload_f32(&self, data: &[f32]) -> Result<DevBuf> {
        self.upload(&data.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    pub fn upload_i32(&self, data: &[i32]) -> Result<DevBuf> {
        self.upload(&data.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
    }

    /// Copies host bytes to `ptr` on the model's stream and waits for the copy.
    pub fn write(&self, ptr: DevPtr, data: &[u8]) -> Result<()> {
        // SAFETY: `data` is borrowed until `sync()` below has waited for the copy; `ptr` is the
        // caller's device allocation of at least `data.len()` bytes.
        unsafe { cudarc::driver::result::memcpy_htod_async(ptr, data, self.stream.cu_stream()) }
            .map_err(|e| anyhow!("upload: {e:?}"))?;
        self.sync()
    }

    /// Copies `n` values at `ptr` back to the host, through the pinned staging buffer (a copy
    /// into pageable memory measured ~1.5 ms a megabyte on the H200 machine); synchronises the
    /// stream. `T` is a plain number type (its bytes are the device's, little-endian).
    fn download_values<T: Copy>(&self, ptr: DevPtr, n: usize) -> Result<Vec<T>> {
        let bytes = n * std::mem::size_of::<T>();
        let mut host: Vec<T> = Vec::with_capacity(n);
        self.ctx.bind_to_thread().map_err(|e| anyhow!("download: {e:?}"))?;
        let mut staging = self.staging.lock().map_err(|_| anyhow!("download: staging buffer poisoned"))?;
        let pinned = staging.at_least(bytes)?;
        // SAFETY: `pinned` is a page-locked host allocation of at least `bytes` bytes that only this
        // (locked) call uses; `ptr` is the caller's device allocation of at least `bytes` bytes; the
        // copy is ordered on the model's stream and complete after the synchronisation.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(pinned, bytes);
            cudarc::driver::result::memcpy_dtoh_async(dst, ptr, self.stream.cu_stream())
                .map_err(|e| anyhow!("download: {e:?}"))?;
        }
        self.sync()?;
        // SAFETY: `host` has room for `n` values, `bytes` bytes, all written by the copy (T is a
        // plain number type: any bytes are a value); the two allocations are distinct.
        unsafe {
            std::ptr::copy_nonoverlapping(pinned, host.as_mut_ptr() as *mut u8, bytes);
            host.set_len(n);
        }
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
        let Launch { grid, block, shared_bytes, pdl: pdl_on } = launch;
        let (&name, func) = self.functions.get_key_value(name).with_context(|| format!("no kernel named `{name}`"))?;
        // Past the default 48 KB (static shared memory counts too), the kernel must opt in.
        if shared_bytes > 32 * 1024 {
            let mut limits = self.shared_limits.lock().unwrap_or_else(|e| e.into_inner());
            if limits.get(name).is_none_or(|&raised| raised < shared_bytes) {
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

/// NVRTC options for every kernel: Hopper with its arch-specific instructions.
fn compile_options() -> cudarc::nvrtc::CompileOptions {
    cudarc::nvrtc::CompileOptions {
        arch: Some("sm_90a"),
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

/// Compiles one kernel file with NVRTC; returns its PTX text.
pub fn compile(source: &kernels::Source) -> Result<String> {
    let text = source.full_text();
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(&text, compile_options()).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => {
            anyhow!("kernel file {} does not compile:\n{}", source.file, log.to_string_lossy())
        }
        other => anyhow!("kernel file {}: NVRTC failed: {other:?}", source.file),
    })?;
    Ok(ptx.to_src())
}

/// `compile`, cached in `$SOLO_CACHE/kernels` (or `~/.cache/solo/kernels`) by source hash.
/// A compile failure becomes one line naming the file and its first error; the whole NVRTC log
/// goes to `<cache>/<file>.log`.
fn compile_cached(source: &kernels::Source) -> Result<String> {
    let dir = cache_dir();
    let path =
        dir.as_ref().map(|d| d.join(format!("{}-{:016x}.ptx", source.file.trim_end_matches(".cu"), source.hash())));
    if let Some(ptx) = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
        return Ok(ptx);
    }
    let ptx = compile(source).map_err(|e| {
        let log = format!("{e:#}");
        let first = log.lines().find(|l| l.contains("error")).unwrap_or("see the log").trim().to_string();
        let saved = dir
            .as_ref()
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
