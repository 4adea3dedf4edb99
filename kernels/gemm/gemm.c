/* GEMM driver: plan (blocking, workspace) and run one thread's share.
 * Loop nest per share, BLIS-style: jc (nc columns) > pc (kc depth, pack B
 * block) > ic (mc rows, pack A block) > then, by the variant's order
 * (gemm_internal.h), ir (mr) > jr (nr) with the A micro-panel in L1, or jr >
 * ir with the B micro-panel in L1. B is packed ahead (pack_b), packed by the
 * first row panel's kernels (ukr_pack), or was packed once by
 * hwt_gemm_pack_b (run_part_packed). */
#include <string.h>
#include "gemm_internal.h"

static int desc_valid(const hwt_gemm_desc *d) {
  if (d->M < 0 || d->N < 0 || d->K < 0) return 0;
  if (d->ldc < d->N || d->ldc < 1) return 0;
  if (d->lda < (d->trans_a ? d->M : d->K) || d->lda < 1) return 0;
  if (d->ldb < (d->trans_b ? d->K : d->N) || d->ldb < 1) return 0;
  return 1;
}

/* Keep every workspace region 64-byte aligned. */
static size_t align16(size_t n) { return (n + 15) / 16 * 16; }

static int use_gemv(const hwt_gemm_desc *d) { return d->M <= HWT_GEMV_MAX_M; }

/* A 4 KiB page: see run_blocks. */
#define HWT_FUSED_PACK_MAX_ROW_BYTES 4096

static size_t padded_n(const hwt_gemm_plan *p) {
  return (size_t)((p->d.N + p->nr - 1) / p->nr) * (size_t)p->nr;
}

int hwt_gemm_plan_make_for(const hwt_gemm_desc *d, hwt_isa isa, int nth,
                           const hwt_cache_sizes *caches, hwt_gemm_plan *out) {
  if (!d || !out || nth < 1 || !desc_valid(d)) return HWT_EINVAL;
  const hwt_gemm_variant *v = hwt_gemm_variant_get(isa);
  if (!v || !hwt_isa_supported(isa)) return HWT_EISA;
  hwt_cache_sizes host;
  if (!caches) {
    hwt_cache_sizes_host(&host);
    caches = &host;
  }
  memset(out, 0, sizeof(*out));
  out->d = *d;
  out->isa = isa;
  out->nth = nth;
  out->mr = v->mr;
  out->nr = v->nr;
  /* Block for the largest share of the grid this plan is made for, so small
     shares do not reserve (or split over) blocks sized for the whole C. The
     GEMV path ignores the blocking, but a prepacked B (run_part_packed) always
     takes the packed path, so every plan carries one. */
  int tm, tn;
  hwt_gemm_grid(v, d->M, d->N, d->K, nth, &tm, &tn);
  hwt_gemm_desc share = *d;
  int mt = (d->M + v->mr - 1) / v->mr, nt = (d->N + v->nr - 1) / v->nr;
  share.M = (int)(((long long)mt * tn + nth - 1) / nth) * v->mr;
  share.N = (nt + (nth / tm) - 1) / (nth / tm) * v->nr;
  hwt_gemm_blocking(v, &share, caches, &out->mc, &out->kc, &out->nc);
  size_t kc = (size_t)(out->kc > 0 ? out->kc : 1);
  size_t a_block = align16((size_t)out->mc * kc);
  out->packed_b_floats = align16(padded_n(out) * (size_t)d->K);
  if (use_gemv(d)) {
    /* GEMV streams B unblocked; its workspace holds op(A) rows when A is
       transposed (gathered once so the dot products read them contiguously). */
    size_t gather = d->trans_a ? align16((size_t)d->M * (size_t)d->K) : 0;
    out->ws_floats = gather > a_block ? gather : a_block;
    return HWT_OK;
  }
  out->ws_floats = a_block + align16(kc * (size_t)out->nc);
  return HWT_OK;
}

int hwt_gemm_plan_make(const hwt_gemm_desc *d, hwt_isa isa, int nth, hwt_gemm_plan *out) {
  return hwt_gemm_plan_make_for(d, isa, nth, NULL, out);
}

static void run_gemv(const hwt_gemm_plan *p, const hwt_gemm_variant *v, const float *A,
                     const float *B, float *C, const float *bias, float *ws, int tid, int nth) {
  const hwt_gemm_desc *d = &p->d;
  /* Columns in units of 16 floats = one cache line of C, so no two threads
     write the same line. */
  int units = (d->N + 15) / 16, lo, hi;
  hwt_split(units, nth, tid, &lo, &hi);
  int j0 = lo * 16, j1 = hi * 16 < d->N ? hi * 16 : d->N;
  if (j0 >= j1) return;
  const float *a = A;
  size_t lda = (size_t)d->lda;
  if (d->trans_a) {
    for (int i = 0; i < d->M; i++)
      for (int k = 0; k < d->K; k++) ws[(size_t)i * d->K + k] = A[(size_t)k * d->lda + i];
    a = ws;
    lda = (size_t)d->K;
  }
  const float *b = d->trans_b ? B + (size_t)j0 * d->ldb : B + j0;
  v->gemv(d->M, j1 - j0, d->K, a, lda, b, (size_t)d->ldb, d->trans_b, C + j0, (size_t)d->ldc,
          d->beta, bias ? bias + j0 : NULL);
}

/* B_IN_L1 with B packed: share `slice` of `slices` of the next packed B
 * panel (kb rows of 64 bytes, contiguous), prefetched into L2 before one of
 * the current panel's kernels. Spread over all of them, the next panel
 * trickles in from L3 or memory while these compute from L1, instead of
 * stalling the next panel's first kernel; prepacked weights are read from
 * memory once per call. [64,512]x[512,2048], B prepacked, 1 thread, min of
 * 151 (thread time, Zen 3, load ~3): 77.6 / 81.3 -> 85.3 / 85.5 GFLOPS in
 * two runs; [320,512]x[512,2048] and [256,1024]x[1024,1024] within 1%.
 * Not done for the pass that packs B as it goes (its next panel's rows are
 * a row of B apart, a page each for wide B): 2-3% slower there. */
static inline void prefetch_panel_share(const float *next, int kb, int nr, int slice,
                                        int slices) {
  const char *p = (const char *)next;
  size_t bytes = (size_t)kb * (size_t)nr * sizeof(float);
  size_t b0 = bytes * (size_t)slice / (size_t)slices;
  size_t b1 = bytes * (size_t)(slice + 1) / (size_t)slices;
  for (size_t b = b0 / 64 * 64; b < b1; b += 64) __builtin_prefetch(p + b, 0, 2);
}

/* One depth block of one A block: the micro-kernel over its mb x nb tiles in
 * the variant's order. bblk holds the packed kb x nb B block. With `bsrc`
 * (fused packing) the first row panel's kernels read op(B) at bsrc (row
 * stride ldb) instead and write its packed panels to bblk, which is then
 * the workspace's (writable) B block. */
static void run_tiles(const hwt_gemm_variant *v, const float *ap, int mb, int kb,
                      const float *bsrc, size_t ldb, float *bwrite, const float *bblk, int nb,
                      float *c, size_t ldc, float beta, const float *bias) {
  const int mr = v->mr, nr = v->nr;
  if (v->order == HWT_GEMM_B_IN_L1) {
    const int slices = (mb + mr - 1) / mr;
    for (int jr = 0; jr < nb; jr += nr) {
      int n = nb - jr < nr ? nb - jr : nr;
      const float *bpanel = bblk + (size_t)jr * kb;
      const float *bias_j = bias ? bias + jr : NULL;
      const float *next = !bsrc && jr + nr < nb ? bpanel + (size_t)nr * kb : NULL;
      int ir = 0;
      if (bsrc) { /* the first row panel packs this B panel */
        v->ukr_pack(kb, ap, bsrc + jr, ldb, bwrite + (size_t)jr * kb, c + jr, ldc,
                    mb < mr ? mb : mr, n, beta, bias_j);
        ir = mr;
      }
      for (; ir < mb; ir += mr) {
        if (next) prefetch_panel_share(next, kb, nr, ir / mr, slices);
        v->ukr(kb, ap + (size_t)ir * kb, bpanel, (size_t)nr, c + (size_t)ir * ldc + jr, ldc,
               mb - ir < mr ? mb - ir : mr, n, beta, bias_j);
      }
    }
    return;
  }
  for (int ir = 0; ir < mb; ir += mr) {
    const float *a = ap + (size_t)ir * kb;
    float *crow = c + (size_t)ir * ldc;
    int m = mb - ir < mr ? mb - ir : mr;
    for (int jr = 0; jr < nb; jr += nr) {
      int n = nb - jr < nr ? nb - jr : nr;
      if (bsrc && ir == 0)
        v->ukr_pack(kb, a, bsrc + jr, ldb, bwrite + (size_t)jr * kb, crow + jr, ldc, m, n,
                    beta, bias ? bias + jr : NULL);
      else
        v->ukr(kb, a, bblk + (size_t)jr * kb, (size_t)nr, crow + jr, ldc, m, n, beta,
               bias ? bias + jr : NULL);
    }
  }
}

/* run_tiles for a few rows of C over B as it lies (row stride ldb): each
 * full nr-column strip of B is read from memory once, by the first row
 * panel's kernel, which also copies it into bp (ukr_pack), and the other
 * panels read that copy from L1 (kb x nr floats: 9 KiB for kb = 144 on
 * AVX2). Reading the strip where it lies from every panel left it to L1's
 * sets: kb lines ldb floats apart share few of them (ldb = 12544, 50176 B,
 * 1 KiB past a multiple of 4 KiB: a 32-deep strip in 4 of the 64 sets of
 * a 32 KiB 8-way L1, all 8 ways, so the C and A lines of each kernel
 * evicted it). Copying: 16x32x12544 (MobileNetV2's 32->16 projection at
 * 112x112) 1.20x, 24x32x12544 1.16x, 24x96x3136 1.12x, 24x144x3136 1.08x,
 * 12x32x12544 (two panels) 0.99x (benchmarks/gemm_ab.py, 31-61
 * interleaved samples, Zen 3 AVX2, load ~1 of a compile beside it). The
 * last, partial strip is packed into bp first (the kernels read nr
 * columns, its padding zeros). */
static void run_tiles_direct(const hwt_gemm_variant *v, const hwt_gemm_desc *d, const float *B,
                             int pc, int jc, const float *ap, int mb, int kb, float *bp, int nb,
                             float *c, size_t ldc, float beta, const float *bias) {
  const int mr = v->mr, nr = v->nr, full = nb / nr * nr;
  const float *b = B + (size_t)pc * d->ldb + (size_t)jc;
  for (int jr = 0; jr < nb; jr += nr) {
    int n = nb - jr < nr ? nb - jr : nr;
    const float *bpanel = b + jr;
    size_t lb = (size_t)d->ldb;
    if (jr >= full) {
      v->pack_b(d, B, pc, kb, jc + jr, n, nr, bp);
      bpanel = bp;
      lb = (size_t)nr;
    }
    int ir = 0;
    if (jr < full && mb > mr && v->ukr_pack) {
      v->ukr_pack(kb, ap, bpanel, lb, bp, c + jr, ldc, mr, n, beta, bias ? bias + jr : NULL);
      bpanel = bp;
      lb = (size_t)nr;
      ir = mr;
    }
    for (; ir < mb; ir += mr)
      v->ukr(kb, ap + (size_t)ir * kb, bpanel, lb, c + (size_t)ir * ldc + jr, ldc,
             mb - ir < mr ? mb - ir : mr, n, beta, bias ? bias + jr : NULL);
  }
}

static size_t padded_m(const hwt_gemm_plan *p) {
  return (size_t)((p->d.M + p->mr - 1) / p->mr) * (size_t)p->mr;
}

/* One thread's share, BLIS loop nest. B comes packed (`packed`: the whole
 * op(B) as laid out by hwt_gemm_pack_b) or is packed here block by block into
 * the workspace after the A block; A likewise comes packed (`packed_a`, laid
 * out by hwt_gemm_pack_a) or is packed here block by block. */
static void run_blocks(const hwt_gemm_plan *p, const hwt_gemm_variant *v, const float *A,
                       const float *packed_a, const float *B, const float *packed, float *C,
                       const float *bias, float *ws, hwt_gemm_share s) {
  const hwt_gemm_desc *d = &p->d;
  const int mr = v->mr, nr = v->nr, mc = p->mc, kc = p->kc, nc = p->nc;
  float *ap = ws; /* unused with packed_a: the B block then starts ws */
  float *bp = packed_a ? ws : ws + align16((size_t)mc * (size_t)(kc > 0 ? kc : 1));
  size_t npad = padded_n(p), mpad = padded_m(p);
  for (int jc = s.j0; jc < s.j1; jc += nc) {
    int nb = s.j1 - jc < nc ? s.j1 - jc : nc;
    /* do-while: K == 0 still runs one pass, which writes beta*C + bias. */
    int pc = 0;
    do {
      int kb = d->K - pc < kc ? d->K - pc : kc;
      const float *bblk = bp;
      /* Pack as we go when the variant can: the first row panel's kernels
         read B itself and write the packed panels, so B's trip from memory
         overlaps their FMAs instead of running alone before them. A/B in
         one process, AVX-512, 1 thread, median of 101 (us, fused vs pack_b
         first): [64,512]x[512,512] 307/327, [128,768]x[768,768] 1270/1352,
         [256,512]x[512,512] 1127/1207, [64,1024]x[1024,1024] 1307/1448,
         [256,1024]x[1024,1024] 4807/4703 (the one loss, 2-3%). AVX2 (B-panel
         order), Zen 3, min of 151 thread-time samples, two runs (GFLOPS,
         fused vs pack_b first): [64,512]x[512,512] 82.9/80.1, 84.3/81.6;
         [256,1024]x[1024,1024], [64,512]x[512,2048], [128,768]x[768,768]
         within 2% either way.
         Only while a row of B is shorter than a 4 KiB page, though: wider,
         every k of the first row panel's kernels touches a new page, and
         with L2 and L3 shared with other processes those misses stall the
         FMAs that were to hide them. Zen 3 AVX2, 1 thread, load ~19, median
         of 31 interleaved thread-time samples, numpy / hwtune, fused vs
         pack_b first: [64,512]x[512,2048] 0.80 / 0.87, [256,1024]x
         [1024,1024] 0.88 / 1.01 (and 0.86-0.93 / 0.95-0.96 in two more
         runs); narrower B ([64,512]x[512,512], [128,768]x[768,768]) kept
         fused. */
      int fused = !packed && !d->trans_b && v->ukr_pack &&
                  (size_t)d->ldb * sizeof(float) < HWT_FUSED_PACK_MAX_ROW_BYTES;
      /* A few rows of C (MobileNetV2's projections to 16-24 channels: M =
         16-24, K = 32-144, N = 3136-12544) read each B element once or
         twice more from L1 after the first; packing B first cost a pass that
         reads and writes all of it. */
      int direct = !packed && !d->trans_b && !fused && d->M <= HWT_GEMM_DIRECT_MAX_M;
      if (packed)
        bblk = packed + (size_t)pc * npad + (size_t)jc * (size_t)kb;
      else if (!fused && !direct)
        v->pack_b(d, B, pc, kb, jc, nb, nr, bp);
      /* The first depth block applies beta and bias; later ones accumulate. */
      float beta = pc == 0 ? d->beta : 1.0f;
      const float *bias_blk = pc == 0 && bias ? bias + jc : NULL;
      for (int ic = s.i0; ic < s.i1; ic += mc) {
        int mb = s.i1 - ic < mc ? s.i1 - ic : mc;
        /* Share rows and mc are whole mr panels, so a packed A block
           starts at panel ic / mr of its depth block. */
        const float *ablk = packed_a ? packed_a + (size_t)pc * mpad + (size_t)ic * kb : ap;
        if (!packed_a) v->pack_a(d, A, ic, mb, pc, kb, mr, ap);
        if (direct) {
          run_tiles_direct(v, d, B, pc, jc, ablk, mb, kb, bp, nb, C + (size_t)ic * d->ldc + jc,
                           (size_t)d->ldc, beta, bias_blk);
          continue;
        }
        const float *bsrc = fused && ic == s.i0 ? B + (size_t)pc * d->ldb + (size_t)jc : NULL;
        run_tiles(v, ablk, mb, kb, bsrc, (size_t)d->ldb, bp, bblk, nb,
                  C + (size_t)ic * d->ldc + jc, (size_t)d->ldc, beta, bias_blk);
      }
      pc += kb;
    } while (pc < d->K);
  }
}

void hwt_gemm_run_part(const hwt_gemm_plan *p, const float *A, const float *B, float *C,
                       const float *bias, float *ws, int tid, int nth) {
  const hwt_gemm_desc *d = &p->d;
  const hwt_gemm_variant *v = hwt_gemm_variant_get(p->isa);
  if (!v || d->M == 0 || d->N == 0 || tid < 0 || tid >= nth) return;
  if (use_gemv(d)) {
    run_gemv(p, v, A, B, C, bias, ws, tid, nth);
    return;
  }
  run_blocks(p, v, A, NULL, B, NULL, C, bias, ws,
             hwt_gemm_share_of(v, d->M, d->N, d->K, tid, nth));
}

int hwt_gemm_pack_b(const hwt_gemm_plan *p, const float *B, float *packed) {
  const hwt_gemm_variant *v = p ? hwt_gemm_variant_get(p->isa) : NULL;
  if (!v || !packed || (!B && p->d.K > 0 && p->d.N > 0)) return HWT_EINVAL;
  const hwt_gemm_desc *d = &p->d;
  size_t npad = padded_n(p);
  /* Block pc holds kb x npad floats: the panels pack_b writes for columns
     [0, N), so run_blocks finds columns jc.. of it at jc * kb. */
  for (int pc = 0; pc < d->K; pc += p->kc) {
    int kb = d->K - pc < p->kc ? d->K - pc : p->kc;
    if (d->N > 0) v->pack_b(d, B, pc, kb, 0, d->N, p->nr, packed + (size_t)pc * npad);
  }
  return HWT_OK;
}

void hwt_gemm_run_part_packed(const hwt_gemm_plan *p, const float *A, const float *packed_b,
                              float *C, const float *bias, float *ws, int tid, int nth) {
  const hwt_gemm_desc *d = &p->d;
  const hwt_gemm_variant *v = hwt_gemm_variant_get(p->isa);
  if (!v || d->M == 0 || d->N == 0 || tid < 0 || tid >= nth) return;
  run_blocks(p, v, A, NULL, NULL, packed_b, C, bias, ws,
             hwt_gemm_share_of(v, d->M, d->N, d->K, tid, nth));
}

size_t hwt_gemm_packed_a_floats(const hwt_gemm_plan *p) {
  return align16(padded_m(p) * (size_t)p->d.K);
}

size_t hwt_gemm_ws_floats_upto(const hwt_gemm_desc *d, hwt_isa isa, int nth) {
  size_t most = 0;
  for (int t = 1; t <= nth; t++) {
    hwt_gemm_plan p;
    if (hwt_gemm_plan_make(d, isa, t, &p) == HWT_OK && p.ws_floats > most) most = p.ws_floats;
  }
  return most;
}

size_t hwt_gemm_packed_a_ws_floats(const hwt_gemm_plan *p) {
  return align16((size_t)(p->kc > 0 ? p->kc : 1) * (size_t)p->nc);
}

int hwt_gemm_pack_a(const hwt_gemm_plan *p, const float *A, float *packed) {
  const hwt_gemm_variant *v = p ? hwt_gemm_variant_get(p->isa) : NULL;
  if (!v || !packed || (!A && p->d.K > 0 && p->d.M > 0)) return HWT_EINVAL;
  const hwt_gemm_desc *d = &p->d;
  const size_t mpad = padded_m(p);
  /* Block pc holds its kb x mpad floats as ceil(M/mr) micro-panels, so
     run_blocks finds rows ic.. of it at ic * kb. */
  for (int pc = 0; pc < d->K; pc += p->kc) {
    int kb = d->K - pc < p->kc ? d->K - pc : p->kc;
    if (d->M > 0) v->pack_a(d, A, 0, d->M, pc, kb, p->mr, packed + (size_t)pc * mpad);
  }
  return HWT_OK;
}

void hwt_gemm_run_part_packed_a(const hwt_gemm_plan *p, const float *packed_a, const float *B,
                                float *C, const float *bias, float *ws, int tid, int nth) {
  const hwt_gemm_desc *d = &p->d;
  const hwt_gemm_variant *v = hwt_gemm_variant_get(p->isa);
  if (!v || d->M == 0 || d->N == 0 || tid < 0 || tid >= nth) return;
  run_blocks(p, v, NULL, packed_a, B, NULL, C, bias, ws,
             hwt_gemm_share_of(v, d->M, d->N, d->K, tid, nth));
}
