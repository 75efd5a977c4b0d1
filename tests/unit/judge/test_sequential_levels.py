"""The looks' nominal levels computed afresh (the per-process cache cleared first, so each test
here sees the computation itself, not a value another test left in the cache): two looks spend
exactly the O'Brien-Fleming alpha (checked by quadrature, independent of the code's normal
integrals), levels reproduce bit for bit (the quasi-random integrals are seeded), and a look's
note states its level."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as sps

from servegate.judge import sequential


@pytest.fixture(autouse=True)
def _fresh_levels() -> Iterator[None]:
    sequential._levels.cache_clear()
    yield
    sequential._levels.cache_clear()


def _inside_both(c1: float, c2: float, rho: float) -> float:
    """P(|Z1| < c1, |Z2| < c2) for standard normals of correlation ``rho``, by quadrature."""
    s = np.sqrt(1.0 - rho * rho)

    def given(z: float) -> float:
        return float(sps.norm.pdf(z) * (sps.norm.cdf((c2 - rho * z) / s)
                                        - sps.norm.cdf((-c2 - rho * z) / s)))

    return float(integrate.quad(given, -c1, c1, epsabs=1e-13, epsrel=1e-12)[0])


@pytest.mark.parametrize(("look", "blocks"), [(2, 4), (1, 4), (3, 4), (1, 2)])
def test_two_looks_spend_exactly_the_obrien_fleming_alpha(look: int, blocks: int) -> None:
    alpha = 0.05
    first, final = sequential.nominal_levels([look], blocks, alpha)
    t = look / blocks
    assert first == pytest.approx(sequential.spent(t, alpha), rel=1e-9)
    c1, c2 = sps.norm.isf(first / 2), sps.norm.isf(final / 2)
    crossed = 1.0 - _inside_both(c1, c2, np.sqrt(t))
    assert crossed == pytest.approx(alpha, abs=2e-7)
    assert final < alpha                       # the first look spent some of it


def test_levels_recomputed_are_the_same_bit_for_bit() -> None:
    """Three looks or more need quasi-random normal integrals: seeded, so a run's levels
    (run.json ``sequential.levels``, the judge's confidence at a look) never vary."""
    first = sequential.nominal_levels([2, 3], 4, 0.05)
    sequential._levels.cache_clear()
    again = sequential.nominal_levels([2, 3], 4, 0.05)
    assert first == again and len(first) == 3
    assert first[0] < first[1] < first[2] < 0.05


def test_spending_is_obrien_fleming_and_all_of_alpha_at_the_end() -> None:
    z = sps.norm.isf(0.025)
    assert sequential.spent(0.25, 0.05) == pytest.approx(2 * sps.norm.sf(z / 0.5), rel=1e-12)
    assert sequential.spent(1.0, 0.05) == 0.05 and sequential.spent(1.5, 0.05) == 0.05
    assert sequential.look_fractions([1, 3, 4, 6], 4) == [0.25, 0.75, 1.0]


def test_a_looks_note_states_its_family_level_in_percent() -> None:
    design = {"in_server": True, "blocks": 4, "looks": [2]}
    look = sequential.look_at(design, 0.05, 2)
    assert look is not None
    percent = f"{100 * sequential.spent(0.5, 0.05):.3g}%"
    assert percent == "0.557%"
    assert look.note() == ("sequential design: look 1 of 2 (the first 2 of 4 blocks of every "
                           f"start), family-wise level {percent} (O'Brien-Fleming alpha spending "
                           "over looks at (2, 4) blocks)")


def test_only_an_in_server_design_with_looks_or_a_crossover_has_looks() -> None:
    assert sequential.look_at({"in_server": False, "blocks": 4, "looks": [2]}, 0.05, 2) is None
    assert sequential.look_at({"blocks": 4, "crossover": True}, 0.05, None) is None
    assert sequential.look_at({"in_server": True, "blocks": 4, "looks": []}, 0.05, None) is None
    look = sequential.look_at({"in_server": True, "blocks": 6, "looks": [2, 4]}, 0.05, 4)
    assert look is not None and (look.index, look.count, look.blocks, look.of_blocks) == (
        1, 3, 4, 6)
    assert look.schedule == (2, 4, 6) and not look.final
    assert look.level == pytest.approx(sequential.nominal_levels([2, 4], 6, 0.05)[1])


def test_a_run_stopped_early_says_where_and_one_that_ran_out_says_nothing() -> None:
    assert sequential.stopped_at({"sequential": {"stopped_at_blocks": 3}}) == 3
    assert sequential.stopped_at({"sequential": {"stopped_at_blocks": 0}}) == 0
    assert sequential.stopped_at({"sequential": {"stopped_at_blocks": None}}) is None
    assert sequential.stopped_at({"sequential": None}) is None
    assert sequential.stopped_at({}) is None


def test_the_stop_rule_reads_the_checks_on_the_last_axis_whatever_leads() -> None:
    """Two designs x three nights x two checks: each night stops on a gated regression or when
    none of its gated checks is undecided (code 3), never pooled over nights."""
    codes = np.array([[[1, 3], [0, 3], [0, 0]], [[0, 2], [3, 0], [3, 1]]])
    gating = np.ones_like(codes, dtype=bool)
    assert sequential.stops(codes, gating).tolist() == [[True, False, True],
                                                        [True, False, True]]


def _inside_three(c: np.ndarray, t: list[float]) -> float:
    """P(|W(t_i)| / sqrt(t_i) < c_i at three looks) for Brownian motion W, as a double integral
    over W(t_1) and W(t_2) with the third look's probability in closed form."""
    a1, a2, a3 = (float(ci * np.sqrt(ti)) for ci, ti in zip(c, t, strict=True))
    s21, s32 = np.sqrt(t[1] - t[0]), np.sqrt(t[2] - t[1])

    def density(y: float, x: float) -> float:
        third = sps.norm.cdf((a3 - y) / s32) - sps.norm.cdf((-a3 - y) / s32)
        return float(sps.norm.pdf(x, scale=np.sqrt(t[0])) * sps.norm.pdf(y, loc=x, scale=s21)
                     * third)

    return float(integrate.dblquad(density, -a1, a1, -a2, a2, epsabs=1e-12, epsrel=1e-10)[0])


@pytest.mark.parametrize("looks", [[2, 3], [1, 3]])
def test_three_looks_spend_the_alpha_to_the_integrals_precision(looks: list[int]) -> None:
    """The quasi-random integral's tolerance (abseps 1e-7, 200 000 points) keeps the family's
    crossing probability within 2.5e-7 of alpha (measured: 9e-8; scipy's default tolerance
    1e-5 would leave 2.6e-6)."""
    levels = sequential.nominal_levels(looks, 4, 0.05)
    c = sps.norm.isf(np.array(levels) / 2)
    crossed = 1.0 - _inside_three(c, sequential.look_fractions(looks, 4))
    assert crossed == pytest.approx(0.05, abs=2.5e-7)


def test_a_night_not_stopped_yet_counts_as_running_to_the_end() -> None:
    walk = sequential.FirstStops(3, blocks=4)
    walk.take(2, np.array([[1], [3], [3]]), np.ones((3, 1), dtype=bool))
    assert walk.ran.tolist() == [2, 4, 4]
