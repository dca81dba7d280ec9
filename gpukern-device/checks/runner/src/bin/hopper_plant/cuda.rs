//! The few CUDA driver calls the plants need, through cudarc: the planted kernels' `sm_90a`
//! module, buffers, 2-D tensor maps, and launches (in clusters where asked).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr, DriverError,
};

/// The planted kernels' PTX, as built by the runner's build script.
static PLANTS: gpukern::PtxSet = gpukern::include_ptx!(gpukern_device_hopper_checks);

/// CUDA device 0, its stream, and the planted kernels' `sm_90a` module.
pub struct Device {
    pub stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
}

impl Device {
    /// Opens device 0 and loads the module.
    pub fn open() -> Result<Device, String> {
        let ptx = PLANTS
            .modules
            .iter()
            .find(|m| m.arch == "sm_90a")
            .ok_or("no sm_90a module: build with GPUKERN_PTX_ARCHS unset (or naming sm_90a)")?;
        // SAFETY: looks for the driver library; nothing else.
        if !unsafe { sys::is_culib_present() } {
            return Err("no CUDA driver (libcuda) on this machine".into());
        }
        let ctx = CudaContext::new(0).map_err(|e| format!("CUDA device 0: {e}"))?;
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx.ptx))
            .map_err(|e| format!("loading the sm_90a module: {e}"))?;
        Ok(Device {
            stream: ctx.default_stream(),
            module,
        })
    }

    /// The entry point `name`.
    pub fn function(&self, name: &str) -> Result<CudaFunction, String> {
        self.module
            .load_function(name)
            .map_err(|e| format!("entry {name}: {e}"))
    }

    /// `data` in device memory.
    pub fn upload<T: DeviceRepr>(&self, data: &[T]) -> Result<CudaSlice<T>, String> {
        self.stream.clone_htod(data).map_err(|e| format!("upload: {e}"))
    }

    /// The device address of `buffer`.
    pub fn address<T>(&self, buffer: &CudaSlice<T>) -> u64 {
        buffer.device_ptr(&self.stream).0
    }

    /// `buffer` back on the host (after the stream's work).
    pub fn download<T: DeviceRepr + Default + Clone>(
        &self,
        buffer: &CudaSlice<T>,
    ) -> Result<Vec<T>, DriverError> {
        self.stream.clone_dtoh(buffer)
    }

    /// Launches `function` with `params` (each 8 bytes: a device address or a `usize`) on
    /// `grid x block` threads with `shared` bytes of dynamic shared memory, in clusters of
    /// `cluster` blocks along x if given, then synchronises.
    ///
    /// # Safety
    /// `params` are the kernel's parameters, in order, as its contract wants them.
    pub unsafe fn launch(
        &self,
        function: &CudaFunction,
        (grid, block, shared): (u32, u32, u32),
        cluster: Option<u32>,
        params: &[u64],
    ) -> Result<(), DriverError> {
        let mut values = params.to_vec();
        let mut pointers: Vec<*mut c_void> = values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
        // SAFETY: an all-zero attribute is a valid value of the plain-data union, then set.
        let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attribute.value.clusterDim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
            x: cluster.unwrap_or(1),
            y: 1,
            z: 1,
        };
        let config = sys::CUlaunchConfig {
            gridDimX: grid,
            gridDimY: 1,
            gridDimZ: 1,
            blockDimX: block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: shared,
            hStream: self.stream.cu_stream(),
            attrs: &mut attribute,
            numAttrs: u32::from(cluster.is_some()),
        };
        // SAFETY: the caller's contract; `values`, `pointers`, `config` and `attribute` live
        // through the call.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                function.cu_function(),
                pointers.as_mut_ptr(),
                std::ptr::null_mut(),
            )
            .result()?;
        }
        self.stream.synchronize()
    }
}

/// A 2-D tensor map of a row-major matrix: what `cuTensorMapEncodeTiled` is given.
pub struct Map {
    /// The element type (`FLOAT32` or `BFLOAT16`) and its bytes.
    pub kind: sys::CUtensorMapDataType,
    pub bytes: u64,
    pub address: u64,
    pub rows: u64,
    pub cols: u64,
    /// Elements from one row to the next.
    pub stride: u64,
    pub box_rows: u32,
    pub box_cols: u32,
}

/// The 128-byte-swizzled, zero-filling tensor map of `map` (16 words), or the driver's refusal.
pub fn encode(map: &Map) -> Result<[u64; 16], DriverError> {
    let mut out = sys::CUtensorMap { opaque: [0; 16] };
    let dims = [map.cols, map.rows];
    let strides = [map.stride * map.bytes];
    let boxes = [map.box_cols, map.box_rows];
    let element_strides = [1u32, 1];
    // SAFETY: every pointer is to a live local array of the rank's length (strides: rank - 1);
    // the call only encodes.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut out,
            map.kind,
            2,
            map.address as *mut c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
        .result()?;
    }
    Ok(out.opaque)
}
