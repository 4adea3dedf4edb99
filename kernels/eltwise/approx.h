/* Constants of the fast sigmoid/tanh shared by every variant, so that the
 * portable, AVX2 and AVX-512 code compute the same approximation.
 *
 * exp(y), y in [-HWT_EXP_MIN_ARG, 0]: y = n ln2 + r, |r| <= ln2/2, with ln2
 * split in two (Cody-Waite: HWT_LN2_HI has few mantissa bits, so n * HI is
 * exact for |n| < 2^12) and exp(r) = 1 + r + r^2 P(r), P the degree-5
 * minimax polynomial from Cephes expf (relative error ~1 ulp).
 *
 * sigmoid(x) = s or e*s with e = exp(-|x|) in (0, 1], s = 1/(1 + e): the
 * denominator stays in (1, 2], so no overflow and reciprocal estimates work.
 * tanh(|x|) = 1 - 2e/(1 + e) with e = exp(-2|x|); below HWT_TANH_SMALL that
 * form cancels, so the odd minimax polynomial of Cephes tanhf is used there.
 */
#ifndef HWTUNE_ELTWISE_APPROX_H
#define HWTUNE_ELTWISE_APPROX_H

#define HWT_LOG2E 1.44269504088896341f
#define HWT_LN2_HI 0.693359375f
#define HWT_LN2_LO -2.12194440e-4f
#define HWT_EXP_P0 1.9875691500e-4f
#define HWT_EXP_P1 1.3981999507e-3f
#define HWT_EXP_P2 8.3334519073e-3f
#define HWT_EXP_P3 4.1665795894e-2f
#define HWT_EXP_P4 1.6666665459e-1f
#define HWT_EXP_P5 5.0000001201e-1f

/* |argument| limit of exp: 2^n stays a normal float (n >= -116), avoiding
 * denormal results, which take a ~150-cycle microcode assist per instruction
 * on Intel cores. The price: sigmoid(x < -80) is flushed to 0 (the true value
 * is below 1.9e-35) and tanh(|x| > 40) is exactly +-1 (as tanhf gives). */
#define HWT_EXP_MIN_ARG 80.0f

/* exp over the whole float range: x below HWT_EXP_FLUSH gives 0 (the
 * result would be denormal, below FLT_MIN = e^-87.3365); the scale 2^n is
 * applied in two halves so that each stays a normal float up to overflow. */
#define HWT_EXP_FLUSH -87.3365448f
#define HWT_EXP_CLAMP 89.0f /* beyond e^88.7228 = FLT_MAX: overflows to inf anyway */

/* erf: x + x (P(x^2) - 1) for |x| < 1; 1 - erfc(|x|) above, erfc = exp(R(|x| - 2.5))
 * on [1, HWT_ERF_ONE), then exactly 1 (1 - erfc(3.92) rounds to 1). The
 * coefficients are near-minimax fits derived by fit_erf.py (P: relative
 * error 1.2e-9, R: 5.1e-9 absolute in log space, before float rounding). */
#define HWT_ERF_ONE 4.0f
#define HWT_ERF_MID 2.5f
#define HWT_ERF_P0 7.889121090e-05f
#define HWT_ERF_P1 -8.020841747e-04f
#define HWT_ERF_P2 5.189535392e-03f
#define HWT_ERF_P3 -2.685444462e-02f
#define HWT_ERF_P4 1.128360018e-01f
#define HWT_ERF_P5 -3.761262714e-01f
#define HWT_ERF_P6 1.283791659e-01f /* minus 1: erf(x) = x + x (P - 1) */
#define HWT_ERFC_R0 -5.555363503e-08f
#define HWT_ERFC_R1 1.614955061e-06f
#define HWT_ERFC_R2 -1.302812744e-05f
#define HWT_ERFC_R3 7.739040585e-05f
#define HWT_ERFC_R4 -4.206192498e-04f
#define HWT_ERFC_R5 2.165165961e-03f
#define HWT_ERFC_R6 -1.085822029e-02f
#define HWT_ERFC_R7 -9.438936428e-01f
#define HWT_ERFC_R8 -5.352680731e+00f
#define HWT_ERFC_R9 -7.806815277e+00f

#define HWT_TANH_SMALL 0.625f
#define HWT_TANH_P0 -5.70498872745e-3f
#define HWT_TANH_P1 2.06390887954e-2f
#define HWT_TANH_P2 -5.37397155531e-2f
#define HWT_TANH_P3 1.33314422036e-1f
#define HWT_TANH_P4 -3.33332819422e-1f

#endif
