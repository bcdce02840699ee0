/*
 * attention/attn_kern_ab.h — the switches kernel B is built with
 * (attn_kern_avx512b.c, meson -Dattn_ab=true), to time a change to
 * attn_kern_body.h against the kernel as it is: bench_attention --ab runs
 * both in one process on the same K/V, alternated call by call.  Put
 * here the -D-style defines of the variant (the body's #ifndef knobs,
 * e.g. PF_STEPS, PF_SPLIT, PF_HINT, CB, or a new one guarded by #ifdef in
 * the body).  Empty, B is A: an A/A run, which shows the method's own
 * spread.
 *
 * Why in one process: each process maps its own K/V arena, and where its
 * pages land moves a decode's rate by more than most changes do; on the
 * Zen 5 VM two builds run in alternated processes each won in one run of
 * four rounds and lost in the next by 10-15%, where both kernels in one
 * process gave the same ratio in every run (BENCHMARKS.md, the nineteenth
 * session).
 */
