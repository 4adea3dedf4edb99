/* Export macro and common status codes shared by every hwtune C header. */
#ifndef HWTUNE_API_H
#define HWTUNE_API_H

#if defined(_WIN32)
#define HWT_API __declspec(dllexport)
#else
#define HWT_API __attribute__((visibility("default")))
#endif

/* Status codes: 0 is success, negative values are errors. */
enum {
  HWT_OK = 0,
  HWT_EINVAL = -1,   /* bad argument (shape, thread count, pointer) */
  HWT_ENOMEM = -2,   /* allocation failed */
  HWT_EISA = -3,     /* requested ISA variant not supported on this CPU/build */
  HWT_ESYS = -4      /* a system call failed (thread creation, ...) */
};

/* Cache line size used for padding shared atomics and aligning buffers. */
#define HWT_CACHELINE 64

#endif
