/* LD_PRELOAD shim: CPUID reports no AVX-512 to this process, so libraries that pick their
 * kernels at run time (onnxruntime's MLAS, numpy) run their AVX2 ones: bench/compare.py
 * --peer-isa avx2. Linux on a CPU with CPUID faulting (the cpuid_fault flag): CPUID traps,
 * the SIGSEGV handler runs the real instruction and clears the AVX-512 feature bits. A
 * SIGSEGV handler the process installs later (TVM's backtrace printer) is kept as the next
 * handler, called for every fault that is not a CPUID. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction;
static struct sigaction next_handler; /* the process's own SIGSEGV handler (SIG_DFL first) */

static int set_cpuid(int on) { return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, on); }

static void on_segv(int sig, siginfo_t *info, void *ctx) {
    ucontext_t *uc = (ucontext_t *)ctx;
    greg_t *r = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)r[REG_RIP];
    if (ip[0] != 0x0f || ip[1] != 0xa2) { /* a real fault: the process's handler, else the default */
        if (next_handler.sa_flags & SA_SIGINFO) {
            next_handler.sa_sigaction(sig, info, ctx);
        } else if (next_handler.sa_handler == SIG_IGN) {
            return;
        } else if (next_handler.sa_handler != SIG_DFL) {
            next_handler.sa_handler(sig);
        } else {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            real_sigaction(SIGSEGV, &dfl, NULL); /* the instruction faults again, fatally */
        }
        return;
    }
    unsigned leaf = (unsigned)r[REG_RAX], sub = (unsigned)r[REG_RCX], a, b, c, d;
    set_cpuid(1);
    __cpuid_count(leaf, sub, a, b, c, d);
    set_cpuid(0);
    if (leaf == 7 && sub == 0) {
        b &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
        c &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
        d &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 23));
    } else if (leaf == 7 && sub == 1) {
        a &= ~(1u << 5); /* AVX512_BF16 */
    }
    r[REG_RAX] = a;
    r[REG_RBX] = b;
    r[REG_RCX] = c;
    r[REG_RDX] = d;
    r[REG_RIP] += 2;
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (sig != SIGSEGV || real_sigaction == NULL)
        return (real_sigaction ? real_sigaction : (sigaction_fn)dlsym(RTLD_NEXT, "sigaction"))(sig, act, old);
    if (old) *old = next_handler;
    if (act) next_handler = *act;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler) {
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    if (sigaction(sig, &act, &old) != 0) return SIG_ERR;
    return (old.sa_flags & SA_SIGINFO) ? (sighandler_t)old.sa_sigaction : old.sa_handler;
}

__attribute__((constructor)) static void hide_avx512(void) {
    real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    memset(&next_handler, 0, sizeof next_handler);
    next_handler.sa_handler = SIG_DFL;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    real_sigaction(SIGSEGV, &sa, NULL);
    if (set_cpuid(0) != 0) {
        fprintf(stderr, "hide_avx512: CPUID faulting is not available on this machine\n");
        _exit(3);
    }
}
