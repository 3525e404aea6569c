/*! td_loop, the C loop of a Scan whose step is all fused elementwise kernels
   (theano_dag.engines.cpu.loop): per step it points the step's input arrays at their rows,
   calls the kernels recorded from one step run by Python, with the same array objects,
   and copies the step's outputs into their rows. No Python object is made or checked: the
   kernels check their operands themselves and report an error code, after which the
   Python loop takes that step over (and raises what numpy would). */
#include <stddef.h>
#include <string.h>

typedef int (*td_k1)(void *);
typedef int (*td_k2)(void *, void *);
typedef int (*td_k3)(void *, void *, void *);
typedef int (*td_k4)(void *, void *, void *, void *);
typedef int (*td_k5)(void *, void *, void *, void *, void *);
typedef int (*td_k6)(void *, void *, void *, void *, void *, void *);
typedef int (*td_k7)(void *, void *, void *, void *, void *, void *, void *);
typedef int (*td_k8)(void *, void *, void *, void *, void *, void *, void *, void *);

#define TD_MAX_ARGS 8
#define TD_DATA(o, off) (*(char **)((char *)(o) + (off)))

static int td_call(void *fn, int n, void **a)
{
    switch (n) {
    case 1: return ((td_k1)fn)(a[0]);
    case 2: return ((td_k2)fn)(a[0], a[1]);
    case 3: return ((td_k3)fn)(a[0], a[1], a[2]);
    case 4: return ((td_k4)fn)(a[0], a[1], a[2], a[3]);
    case 5: return ((td_k5)fn)(a[0], a[1], a[2], a[3], a[4]);
    case 6: return ((td_k6)fn)(a[0], a[1], a[2], a[3], a[4], a[5]);
    case 7: return ((td_k7)fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
    case 8: return ((td_k8)fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
    default: return -1;
    }
}

/* A row walker: row (t + off) mod size of an array whose row 0 starts at base. */
typedef struct {
    char *base;
    ptrdiff_t stride;
    long off, size;
} td_rows;

static inline char *td_row(const td_rows *r, long t)
{
    return r->base + ((t + r->off) % r->size) * r->stride;
}

int td_loop_arity(void) { return TD_MAX_ARGS; }

/* Runs steps t0 .. n-1. views[i] (an ndarray) is pointed at row t of view_rows[i];
   call j runs fns[j] on nargs[j] objects (args, flattened); then nbytes[c] bytes of
   src[c]'s data go to row t of dst_rows[c]. cond (or NULL) is the until flag's array
   (cond_bytes bytes, nonzero: stop after this step). Returns the steps done; *status
   says why it stopped: 0 all done, 1 until, 2 a kernel's error (step t not done). */
long td_loop(long t0, long n, ptrdiff_t data_off,
             int nviews, void **views, const td_rows *view_rows,
             int ncalls, void **fns, const int *nargs, void **args,
             int ncopies, void **src, const td_rows *dst_rows, const ptrdiff_t *nbytes,
             void *cond, int cond_bytes, int *status)
{
    *status = 0;
    for (long t = t0; t < n; t++) {
        for (int i = 0; i < nviews; i++) TD_DATA(views[i], data_off) = td_row(&view_rows[i], t);
        void **a = args;
        for (int j = 0; j < ncalls; j++) {
            if (td_call(fns[j], nargs[j], a)) {
                *status = 2;
                return t;
            }
            a += nargs[j];
        }
        for (int c = 0; c < ncopies; c++)
            memmove(td_row(&dst_rows[c], t), TD_DATA(src[c], data_off), (size_t)nbytes[c]);
        if (cond != NULL) {
            const char *p = TD_DATA(cond, data_off);
            for (int b = 0; b < cond_bytes; b++)
                if (p[b]) {
                    *status = 1;
                    return t + 1;
                }
        }
    }
    return n;
}
