"""The group-sequential test of a time figure: decide as soon as the data
allow, keeping the false-positive rate at alpha however often it looks.

Data: one value per round, the log of the ratio of the figure's chunk
median to its partner's chunk median measured right beside it in the same
round (paired: the other build, or the reference kernel). A neighbour's
load burst lasting a second or more slows both chunks of a round alike and
divides out; what is left varies from round to round, and rounds are the
level where repetitions buy precision (Kalibera & Jones, "Rigorous
benchmarking in reasonable time", ISMM 2013: repeat at the level with the
variance; `plan_chunk` sizes the lower level, samples per chunk, with their
cost formula).

- Paired (two builds interleaved): d_i = log(B_i / A_i); the slowdown is
  exp(trimmed mean d) - 1; Yuen's one-sample trimmed t interval.
- Against a stored baseline: r_i = log(figure_i / reference_i) in both
  runs; the slowdown is exp(trimmed mean r_cur - trimmed mean r_base) - 1;
  Yuen-Welch's two-sample interval.

Looks happen after rounds n = min_rounds * 1.25^j (a schedule fixed in
advance). At look k the test spends alpha_k = A(t_k) - A(t_{k-1}) of the
false-positive budget, where t = rounds / max_rounds is the information
fraction and A(t) = alpha * ln(1 + (e - 1) t) is Lan & DeMets' Pocock-type
spending function (Lan & DeMets, Biometrika 1983; Kim & DeMets, 1987); the
final look spends what is left. Each look's one-sided test at level
alpha_k is valid on its own, so by the union bound the chance that any look
declares a regression of an unchanged figure is at most sum alpha_k =
alpha (conservative: the looks' statistics are correlated, the exact
group-sequential boundaries are a little wider). The pass ("no slowdown of
min_effect or more") bound spends beta the same way.

Verdicts at a look:
- regression: the alpha_k lower bound of the slowdown is above 0 and the
  estimate is at least min_effect;
- improvement (a pass with a note): the alpha_k upper bound is below 0 and
  the estimate is at least min_effect faster;
- pass: the beta_k upper bound is below min_effect;
- undecidable: none of these by the final look (time cap or max_rounds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

# Chance of passing a figure that really slowed by min_effect or more.
# 5%: a missed 5% regression is found by the next run; a gate that takes
# twice as long to pass an unchanged build on every run is paid every time.
BETA = 0.05
# Looks after rounds min_rounds * GROWTH^j: 1.25 gives ~25 looks between 8
# and 2000 rounds; denser looks split the alpha budget into smaller pieces
# without deciding much sooner.
GROWTH = 1.25


# -- Student's t ---------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _ibeta(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbt = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
           + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * _ibeta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t > 0 else 1.0 - tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T > t) = p (0 < p < 0.5), by bisection on t_sf."""
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > p:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_sf(mid, df) > p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10 * hi:
            break
    return hi


# -- spending --------------------------------------------------------------------
def pocock_spent(level: float, t: float) -> float:
    """Lan-DeMets Pocock-type spending: level * ln(1 + (e - 1) t), t in [0, 1]."""
    t = min(1.0, max(0.0, t))
    return level * math.log1p((math.e - 1.0) * t)


def look_schedule(min_rounds: int, max_rounds: int) -> List[int]:
    """The round counts at which the test looks (fixed before sampling)."""
    out, n = [], float(min_rounds)
    while int(n) < max_rounds:
        if not out or int(n) > out[-1]:
            out.append(int(n))
        n *= GROWTH
    return out + [max_rounds]


# -- data --------------------------------------------------------------------------
def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else 0.5 * (s[m - 1] + s[m])


def round_logratios(num: Sequence[float], den: Sequence[float], ends: Sequence[int],
                    keep: Optional[Sequence[bool]] = None) -> List[float]:
    """log(median(num's round i) / median(den's round i)) for every round
    kept (keep[i] False: discarded by the preemption rule)."""
    out, start = [], 0
    for i, end in enumerate(ends):
        a, b = num[start:end], den[start:end]
        start = end
        if keep is not None and i < len(keep) and not keep[i]:
            continue
        if not a or not b:
            continue
        ma, mb = _median(a), _median(b)
        if ma > 0 and mb > 0 and math.isfinite(ma) and math.isfinite(mb):
            out.append(math.log(ma / mb))
    return out


# Share trimmed from each end of the per-round values (Yuen's trimmed
# means). Rounds are heavy-tailed here: on the loaded 2-core EPYC VM most
# paired rounds of an unchanged GEMM differed by 0-2%, but one in five had
# one side's whole chunk in a slow phase of the host (+-15-60%); 20%
# trimming (Wilcox's default) keeps a t-test valid and its interval narrow
# on such data, where the mean's interval is wide.
TRIM = 0.2


def _trimmed(xs: Sequence[float], trim: float = TRIM) -> Tuple[float, float, int]:
    """(trimmed mean, winsorized variance (n - 1 denominator), h = values
    left after trimming) of xs."""
    s = sorted(xs)
    n = len(s)
    g = int(trim * n)
    h = n - 2 * g
    mid = s[g:n - g]
    tm = sum(mid) / h
    win = [s[g]] * g + mid + [s[n - g - 1]] * g
    wm = sum(win) / n
    wv = sum((v - wm) ** 2 for v in win) / (n - 1) if n > 1 else 0.0
    return tm, wv, h


def estimate(cur: Sequence[float], base: Optional[Sequence[float]]) -> Tuple[float, float, float]:
    """(change in the trimmed mean of the log-ratios, its standard error,
    degrees of freedom): Yuen's one-sample trimmed t on paired values (base
    None), else Yuen-Welch's two-sample (Yuen, Biometrika 1974)."""
    def part(xs):
        tm, wv, h = _trimmed(xs)
        return tm, (len(xs) - 1) * wv / (h * (h - 1)) if h > 1 else 0.0, h
    mc, dc, hc = part(cur)
    if base is None:
        return mc, math.sqrt(dc), hc - 1.0
    mb, db, hb = part(base)
    se2 = dc + db
    if se2 <= 0:
        return mc - mb, 0.0, float(hc + hb - 2)
    den = (dc * dc / (hc - 1) if hc > 1 else 0.0) + (db * db / (hb - 1) if hb > 1 else 0.0)
    df = se2 * se2 / den if den > 0 else float(hc + hb - 2)
    return mc - mb, math.sqrt(se2), df


# -- the test ---------------------------------------------------------------------
@dataclass
class Decision:
    status: str            # regression | improvement | pass | undecidable
    ratio: float           # exp(estimate): > 1 slower
    ci: Tuple[float, float]  # the look's alpha-level interval of the ratio
    p: float               # one-sided p of 'slower' at this look
    rounds: int            # rounds used (after discards)
    looks: int
    reason: str


class SequentialTest:
    """One figure's group-sequential test; call look() at each scheduled
    round count (others return None without spending anything)."""

    def __init__(self, *, alpha: float, min_effect: float, min_rounds: int, max_rounds: int,
                 beta: float = BETA):
        self.alpha, self.beta, self.min_effect = alpha, beta, min_effect
        self.schedule = look_schedule(min_rounds, max_rounds)
        self.max_rounds = max_rounds
        self.spent_a = self.spent_b = 0.0
        self.looks = 0
        self.last: Optional[Decision] = None

    def due(self, rounds: int, final: bool) -> bool:
        return final or rounds in self.schedule

    def look(self, cur: Sequence[float], base: Optional[Sequence[float]], rounds: int,
             share: float) -> Optional[Decision]:
        """The verdict at this look, or None to keep sampling. cur: this
        run's per-round values (paired log-ratios, or figure/reference
        log-ratios); base: the baseline's figure/reference log-ratios (None
        when paired). share: information fraction, 1.0 at the final look."""
        final = share >= 1.0
        if not self.due(rounds, final):
            return None
        self.looks += 1
        a_k = (self.alpha if final else pocock_spent(self.alpha, share)) - self.spent_a
        b_k = (self.beta if final else pocock_spent(self.beta, share)) - self.spent_b
        self.spent_a += a_k
        self.spent_b += b_k
        if len(cur) < 3 or (base is not None and len(base) < 3):
            short = f"this run {len(cur)}" if len(cur) < 3 else f"the baseline {len(base)}"
            d = Decision("undecidable", math.nan, (math.nan, math.nan), math.nan, len(cur),
                         self.looks, f"too few undisturbed rounds ({short}; need >= 3)")
            self.last = d
            return d if final else None
        m, se, df = estimate(cur, base)
        bound = math.log1p(self.min_effect)
        if se == 0.0:
            za = zb = 0.0
            p = 0.0 if m > 0 else 1.0
        else:
            za, zb = t_quantile(max(a_k, 1e-300), df), t_quantile(max(b_k, 1e-300), df)
            p = t_sf(m / se, df)
        lo, hi = m - za * se, m + za * se
        ci = (math.exp(lo), math.exp(hi))
        pct = f"{math.exp(m) - 1:+.1%}"
        how = f"{len(cur)} rounds, {self.looks} looks"
        if lo > 0 and m >= bound:
            d = Decision("regression", math.exp(m), ci, p, len(cur), self.looks,
                         f"{pct} slower (p={p:.2g} at look alpha {a_k:.2g}; CI "
                         f"{ci[0]:.3f}-{ci[1]:.3f}; {how})")
        elif hi < 0 and m <= -bound:
            d = Decision("improvement", math.exp(m), ci, p, len(cur), self.looks,
                         f"{pct}: faster (CI {ci[0]:.3f}-{ci[1]:.3f}; {how})")
        elif m + zb * se < bound:
            d = Decision("pass", math.exp(m), ci, p, len(cur), self.looks,
                         f"{pct}; any slowdown is below {self.min_effect:.0%} "
                         f"(bound {math.exp(m + zb * se) - 1:+.1%}; {how})")
        elif final:
            d = Decision("undecidable", math.exp(m), ci, p, len(cur), self.looks,
                         f"{pct}, CI {ci[0]:.3f}-{ci[1]:.3f} still spans the "
                         f"{self.min_effect:.0%} threshold after {how}")
        else:
            d = None
        if d is not None:
            self.last = d
        return d
