"""Exit 0 if some OpenCL device can build and run a kernel, else 1 (used by the Makefile).

The pip wheel of PoCL asks LLVM for the host CPU's name; on virtual machines whose CPUID
hides the model, LLVM answers "generic" and every kernel build fails with
"unknown target CPU 'generic'". Debian's PoCL picks its target from the kernel library
instead, so the Makefile installs it when this probe fails.
"""

from __future__ import annotations

import sys


def working_devices():
    import numpy as np
    import pyopencl as cl

    found = []
    for platform in cl.get_platforms():
        for device in platform.get_devices():
            try:
                ctx = cl.Context([device])
                queue = cl.CommandQueue(ctx)
                src = "__kernel void f(__global float *a){a[get_global_id(0)] += 1.0f;}"
                prg = cl.Program(ctx, src).build()
                a = np.zeros(4, dtype=np.float32)
                buf = cl.Buffer(
                    ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=a
                )
                prg.f(queue, a.shape, None, buf)
                cl.enqueue_copy(queue, a, buf)
                queue.finish()
                if np.all(a == 1.0):
                    found.append(f"{platform.name} / {device.name} ({platform.version})")
            except Exception as e:  # a device that cannot build is just not usable
                print(f"unusable: {platform.name} / {device.name}: {str(e).splitlines()[0]}")
    return found


if __name__ == "__main__":
    try:
        devices = working_devices()
    except ImportError as e:
        print(f"pyopencl is not installed: {e}")
        sys.exit(1)
    for d in devices:
        print(f"usable: {d}")
    sys.exit(0 if devices else 1)
