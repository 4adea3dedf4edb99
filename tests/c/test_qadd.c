/* hwt_qadd (hwtune/qadd.h) per ISA variant this CPU runs against the
 * definition written out here, one float operation at a time: every
 * length 0..70 (the 8 / 16-lane steps and their masked tails), u8 and s8
 * ranges, values that saturate either end, a NaN (gives the low end) and
 * ties of the rounding; and hwt_qadd_u8 on bytes. Bit for bit; nothing
 * written past n. Runs under ASan/UBSan. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "hwtune/isa.h"
#include "hwtune/qadd.h"
#include "check.h"

static unsigned rnd_state = 777u;
static int rnd(int lo, int hi) { /* inclusive */
  rnd_state = rnd_state * 1664525u + 1013904223u;
  return lo + (int)((rnd_state >> 8) % (unsigned)(hi - lo + 1));
}

static float want_one(const hwt_qadd_params *p, float a, float b) {
  const float pa = (a - p->za) * p->sa, pb = (b - p->zb) * p->sb;
  float v = (pa + pb) / p->sy;
  v = v > p->lo ? v : p->lo;
  v = v < p->hi ? v : p->hi;
  return ((v + 12582912.0f) - 12582912.0f) + p->zy;
}

int main(void) {
  enum { N = 70 };
  float a[N], b[N], got[N + 8], want[N + 8];
  int cases = 0;
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int s8 = 0; s8 < 2; s8++) {
      /* sy = 1, sa = sb = 0.5, zeros 0: (a + b) / 2 lands on halves (ties) */
      const hwt_qadd_params ps[2] = {
          {0.031f, 120.0f, 0.05f, -4.0f, s8 ? 0.061f : 0.043f, 7.0f, 0.0f, 0.0f},
          {0.5f, 0.0f, 0.5f, 0.0f, 1.0f, s8 ? 0.0f : 3.0f, 0.0f, 0.0f}};
      for (int k = 0; k < 2; k++) {
        hwt_qadd_params p = ps[k];
        p.lo = (s8 ? -128.0f : 0.0f) - p.zy;
        p.hi = (s8 ? 127.0f : 255.0f) - p.zy;
        for (int n = 0; n <= N; n++) {
          for (int i = 0; i < N; i++) {
            a[i] = (float)(s8 ? rnd(-128, 127) : rnd(0, 255));
            b[i] = (float)rnd(-128, 127);
          }
          if (n > 3) a[n - 1] = NAN, a[0] = 255.0f, b[0] = 127.0f, a[1] = 0.0f, b[1] = -128.0f;
          for (int i = 0; i < N + 8; i++) got[i] = want[i] = -1.0f;
          for (int i = 0; i < n; i++) want[i] = want_one(&p, a[i], b[i]);
          hwt_qadd((hwt_isa)isa, &p, a, b, got, n);
          CHECK(memcmp(got, want, sizeof got) == 0, "isa %d s8 %d params %d n %d", isa, s8, k, n);
          cases++;
        }
      }
    }
  }
  /* bytes (hwt_qadd_u8): lengths around the vector steps and the 256-value
     chunk, u8 output; nothing written past n */
  enum { NB = 530 };
  static uint8_t a8[NB], b8[NB], got8[NB + 8], want8[NB + 8];
  const int lens[] = {0, 1, 15, 16, 17, 255, 256, 257, 511, 512, 513, 530};
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    hwt_qadd_params p = {0.031f, 120.0f, 0.05f, 4.0f, 0.043f, 7.0f, -7.0f, 248.0f};
    for (int l = 0; l < (int)(sizeof lens / sizeof lens[0]); l++) {
      const int n = lens[l];
      for (int i = 0; i < NB; i++) a8[i] = (uint8_t)rnd(0, 255), b8[i] = (uint8_t)rnd(0, 255);
      memset(got8, 0xA5, sizeof got8);
      memset(want8, 0xA5, sizeof want8);
      for (int i = 0; i < n; i++) want8[i] = (uint8_t)(int)want_one(&p, a8[i], b8[i]);
      hwt_qadd_u8((hwt_isa)isa, &p, a8, b8, got8, n);
      CHECK(memcmp(got8, want8, sizeof got8) == 0, "u8 isa %d n %d", isa, n);
      cases++;
    }
  }
  /* bytes, every (a, b) pair at once, per params: rounding ties (halves),
     both ends saturating, a zero point of 130, and quotients past 2^30
     (sa / sy ~ 1e9, or a zero point far outside the bytes: the float path;
     below 2^30 the integer rounding) */
  enum { NP = 65536 };
  static uint8_t pa[NP], pb[NP], pg[NP], pw[NP];
  for (int i = 0; i < NP; i++) pa[i] = (uint8_t)(i >> 8), pb[i] = (uint8_t)i;
  const hwt_qadd_params pp[5] = {{0.5f, 0.0f, 0.5f, 0.0f, 1.0f, 3.0f, -3.0f, 252.0f},
                                 {0.031f, 120.0f, 0.05f, 4.0f, 0.0043f, 0.0f, 0.0f, 255.0f},
                                 {0.02f, 141.0f, 0.013f, 120.0f, 0.0088f, 130.0f, -130.0f,
                                  125.0f},
                                 {1e6f, 128.0f, 1.0f, 0.0f, 1e-3f, 9.0f, -9.0f, 246.0f},
                                 {1.0f, -3e6f, 1.0f, 0.0f, 1e-3f, 0.0f, 0.0f, 255.0f}};
  for (int isa = 0; isa < HWT_ISA_COUNT; isa++) {
    if (!hwt_isa_supported((hwt_isa)isa)) continue;
    for (int k = 0; k < 5; k++) {
      for (int i = 0; i < NP; i++) pw[i] = (uint8_t)(int)want_one(&pp[k], pa[i], pb[i]);
      memset(pg, 0xA5, sizeof pg);
      hwt_qadd_u8((hwt_isa)isa, &pp[k], pa, pb, pg, NP);
      CHECK(memcmp(pg, pw, sizeof pg) == 0, "u8 pairs isa %d params %d", isa, k);
      cases++;
    }
  }
  return check_verdict("qadd: %d cases match the definition\n", cases);
}
