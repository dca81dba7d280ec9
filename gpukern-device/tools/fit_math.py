#!/usr/bin/env python3
"""Fits the polynomial coefficients of gpukern-device's accurate math (src/math/accurate.rs).

Each polynomial is a weighted least-squares fit (weights = 1 / |target|, so the error is
relative) on Chebyshev nodes, solved in 60-digit arithmetic with mpmath, then iterated a few
times with Lawson's reweighting towards the minimax fit. The coefficients are printed as f32
literals (rounded to nearest); the Rust tests (gpukern-device/tests/math.rs) measure the error
of the f32 evaluation against an f64 reference, which is what the documented bounds are.

    python3 gpukern-device/tools/fit_math.py
"""
import mpmath as mp

mp.mp.dps = 60


def fit(f, lo, hi, degree, nodes=400, lawson=30):
    """Coefficients c0..c_degree of p(t) ~ f(t) on [lo, hi], relative error near-minimax."""
    ts = [lo + (hi - lo) * (1 - mp.cos(mp.pi * (k + mp.mpf(1) / 2) / nodes)) / 2 for k in range(nodes)]
    ys = [f(t) for t in ts]
    w = [mp.mpf(1)] * nodes
    for _ in range(lawson):
        a = mp.matrix([[mp.sqrt(w[i]) * ts[i] ** j / abs(ys[i]) for j in range(degree + 1)] for i in range(nodes)])
        b = mp.matrix([mp.sqrt(w[i]) * mp.sign(ys[i]) for i in range(nodes)])
        c, _ = mp.qr_solve(a, b)
        err = [abs((sum(c[j] * ts[i] ** j for j in range(degree + 1)) - ys[i]) / ys[i]) for i in range(nodes)]
        total = sum(w[i] * err[i] for i in range(nodes))
        w = [w[i] * err[i] / total for i in range(nodes)]
    return [c[j] for j in range(degree + 1)], max(err)


def f32(x):
    import struct
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def show(name, coeffs, err):
    print(f"// {name}: max relative error of the fit (before f32 rounding) {mp.nstr(err, 3)}")
    for j, c in enumerate(coeffs):
        print(f"    {f32(c)!r:>16}_f32, // t^{j}")


# tanh(x) = x + x^3 P(x^2) for |x| < TANH_SMALL: P(t) = (tanh(sqrt t) / sqrt t - 1) / t.
TANH_SMALL = mp.mpf("0.55")
def tanh_p(t):
    if t == 0:
        return mp.mpf(-1) / 3
    s = mp.sqrt(t)
    return (mp.tanh(s) / s - 1) / t
show("tanh P(t), t = x^2 in [0, 0.55^2]", *fit(tanh_p, mp.mpf(0), TANH_SMALL ** 2, 5))

# erf(x) = x Q(x^2) for |x| < 1.
def erf_q(t):
    if t == 0:
        return 2 / mp.sqrt(mp.pi)
    s = mp.sqrt(t)
    return mp.erf(s) / s
show("erf Q(t), t = x^2 in [0, 1]", *fit(erf_q, mp.mpf(0), mp.mpf(1), 6))

# erfc(x) = exp(-x^2) R(1/x - 5/8) / x for 1 <= x <= 4: R(v) = erfc(x) exp(x^2) x with
# x = 1 / (v + 5/8), v in [-3/8, 3/8] (centred, so that Horner's terms do not cancel).
def erfc_r(v):
    x = 1 / (v + mp.mpf(5) / 8)
    return mp.erfc(x) * mp.exp(x * x) * x
show("erfc R(v), v = 1/x - 5/8 in [-3/8, 3/8]", *fit(erfc_r, -mp.mpf(3) / 8, mp.mpf(3) / 8, 10))
