"""Derives the erf/erfc polynomial coefficients of approx.h (not part of
the build; rerun to change a degree or a range). Needs numpy and mpmath.

Near-minimax fits by Lawson's iteratively reweighted least squares on 2000
Chebyshev nodes, targets evaluated with mpmath at 30 digits:
  P: erf(x) / x as a polynomial in u = x^2 on |x| <= 1, relative error
     (printed minus 1: the kernel adds x * (P - 1) to x, one rounding on
     the small part instead of the whole);
  R: log(erfc(x)) as a polynomial in t = x - 2.5 on 1 <= x <= 4, absolute
     error (so erfc = exp(R) has that relative error).
Printed: the coefficients (highest degree first, Horner order) and the
fit's own max error; the kernels' total error, with float rounding, is
measured by tests/c/test_eltwise.c --exhaustive.
"""

import mpmath as mp
import numpy as np

mp.mp.dps = 30
P_DEGREE, R_DEGREE = 6, 9
R_LO, R_HI, R_MID = 1.0, 4.0, 2.5


def lawson(f, lo, hi, deg, shift=0.0, n=2000, iters=80):
    k = np.arange(n)
    x = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / n)
    y = np.array([f(v) for v in x])
    a = np.stack([(x - shift) ** j for j in range(deg + 1)], 1)
    w = np.full(n, 1.0 / n)
    for _ in range(iters):
        sw = np.sqrt(w)
        c = np.linalg.lstsq(a * sw[:, None], y * sw, rcond=None)[0]
        err = np.abs(a @ c - y)
        w = w * err / np.sum(w * err)
    return c, float(err.max())


def main():
    p, ep = lawson(lambda u: float(mp.erf(mp.sqrt(u)) / mp.sqrt(u)) if u else
                   float(2 / mp.sqrt(mp.pi)), 0.0, 1.0, P_DEGREE)
    r, er = lawson(lambda v: float(mp.log(mp.erfc(v))), R_LO, R_HI, R_DEGREE, R_MID)
    print(f"/* P: max relative error {ep:.2e}; R: max absolute error {er:.2e} */")
    p = p.copy()
    p[0] -= 1.0
    for name, c in (("HWT_ERF_P", p), ("HWT_ERFC_R", r)):
        for j in range(len(c) - 1, -1, -1):
            print(f"#define {name}{len(c) - 1 - j} {c[j]:.9e}f")


if __name__ == "__main__":
    main()
