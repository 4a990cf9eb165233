// saxpy.cu -- a kernel in a shared library of its own, the way users' code
// already is, driven from Python through ctypes and PyGPU's .ptr handles.
//
//   nvcc -O2 -shared -Xcompiler -fPIC -o libsaxpy.so saxpy.cu
//
// The launcher is extern "C" (no C++ name mangling, so ctypes finds it by
// name) and takes plain device pointers, the element count and the stream
// to queue the kernel on; it returns the launch status (0: cudaSuccess).
#include <cuda_runtime.h>

__global__ void saxpy_kernel(float a, const float *x, float *y, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long step = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += step)        // grid-stride: any n with a bounded grid
        y[i] = a * x[i] + y[i];
}

// y[i] = a * x[i] + y[i] for i < n, queued on `stream`.
extern "C" int saxpy(float a, const float *x, float *y, long long n, cudaStream_t stream)
{
    if (n <= 0)
        return 0;
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 65535)
        blocks = 65535;
    saxpy_kernel<<<(unsigned)blocks, threads, 0, stream>>>(a, x, y, n);
    return (int)cudaGetLastError();
}
