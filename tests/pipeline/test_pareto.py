"""Pareto fronts agree with the definition (a brute-force check) on random point sets."""

from hypothesis import given
from hypothesis import strategies as st

from backend.sim.pareto import front_2d, front_3d


def dominated(p: tuple[float, ...], points: list[tuple[float, ...]]) -> bool:
    return any(
        all(a <= b for a, b in zip(q, p, strict=True))
        and any(a < b for a, b in zip(q, p, strict=True))
        for q in points
    )


small = st.integers(min_value=0, max_value=6).map(float)


@given(st.lists(st.tuples(small, small), max_size=40))
def test_front_2d_matches_definition(points: list[tuple[float, float]]) -> None:
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    assert front_2d(xs, ys) == [not dominated(p, points) for p in points]


@given(st.lists(st.tuples(small, small, small), max_size=40))
def test_front_3d_matches_definition(points: list[tuple[float, float, float]]) -> None:
    xs, ys, zs = ([p[i] for p in points] for i in range(3))
    assert front_3d(xs, ys, zs) == [not dominated(p, points) for p in points]


def test_known_front() -> None:
    # (speedup up, accuracy drop down) as minimisation of (-speedup, drop)
    speedup = [1.0, 2.0, 1.5, 2.0, 0.5]
    drop = [0.0, 0.02, 0.01, 0.05, 0.0]
    assert front_2d([-s for s in speedup], drop) == [True, True, True, False, False]
