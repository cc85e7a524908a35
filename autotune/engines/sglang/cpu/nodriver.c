/*
 * autotune's "no driver" stand-in for libcuda.so.1 -- NOT the CUDA driver.
 *
 * SGLang's kernel package (sgl-kernel / sglang-kernel) is published on the registry only as CUDA
 * builds. Its `common_ops` library is linked against the driver library libcuda.so.1, and both
 * SGLang 0.5.9 and 0.5.23 import it unconditionally, even on `--device cpu`. On a machine with no
 * GPU driver the import fails ("libcuda.so.1: cannot open shared object file") before the CPU
 * engine is ever reached.
 *
 * This library defines the driver entry points those kernel libraries bind at load time, and every
 * one of them answers CUDA_ERROR_NO_DEVICE (100): "there is no GPU here". Nothing is emulated.
 * torch keeps reporting no CUDA, and SGLang runs its CPU path.
 *
 * autotune builds it with the system C compiler (`make sglang-cpu`) and puts its folder on the
 * engine's LD_LIBRARY_PATH only, and only where no real libcuda.so.1 can be loaded: it never
 * shadows a real driver. It is never installed system-wide.
 *
 * The symbol list is the one measured in ../shared/reference/sglang-cpu.md (0.5.9 binds all of
 * them; 0.5.23 only cuPointerGetAttribute).
 */

#define NO_DEVICE 100 /* CUDA_ERROR_NO_DEVICE */

static const char no_device_text[] = "no CUDA device (autotune's no-driver stand-in for libcuda.so.1)";

int cuInit(unsigned int flags) { (void)flags; return NO_DEVICE; }

int cuDriverGetVersion(int *version) {
    if (version) *version = 0;
    return NO_DEVICE;
}

int cuDeviceGetCount(int *count) {
    if (count) *count = 0;
    return NO_DEVICE;
}

int cuGetErrorString(int error, const char **text) {
    (void)error;
    if (text) *text = no_device_text;
    return 0;
}

int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr) {
    (void)data; (void)attribute; (void)ptr;
    return NO_DEVICE;
}

int cuMemAddressFree(unsigned long long ptr, unsigned long long size) {
    (void)ptr; (void)size;
    return NO_DEVICE;
}

int cuMemGetAddressRange_v2(unsigned long long *base, unsigned long long *size, unsigned long long ptr) {
    (void)base; (void)size; (void)ptr;
    return NO_DEVICE;
}

int cuMemRelease(unsigned long long handle) { (void)handle; return NO_DEVICE; }

int cuMemRetainAllocationHandle(unsigned long long *handle, void *addr) {
    (void)handle; (void)addr;
    return NO_DEVICE;
}

int cuMemSetAccess(unsigned long long ptr, unsigned long long size, const void *desc, unsigned long long count) {
    (void)ptr; (void)size; (void)desc; (void)count;
    return NO_DEVICE;
}

int cuMemUnmap(unsigned long long ptr, unsigned long long size) {
    (void)ptr; (void)size;
    return NO_DEVICE;
}
