"""scripts/paper/claims.py: the registry of the paper's claims.  Every edition's scenario names
a setting that one claim declares, each row of the opening table names scenarios of its own
claim, and the fourth edition runs point_mass's rows by default."""

import pytest
from paper import claims, fourth, gpu, outages, third_scenarios
from paper.claims import CLAIMS, GROWTH, ROWS


def test_every_scenario_of_every_edition_tests_a_declared_claim():
    scenarios = [
        *third_scenarios.SCENARIOS.values(),
        *outages.SCENARIOS.values(),
        *gpu.scenarios(tiny=False),
        *gpu.scenarios(tiny=True),
    ]
    for sc in scenarios:
        claim = claims.claim_of(sc.setting)
        assert sc.claim == claim.name and sc.setting in claim.settings
    # the third and fourth editions run only claims they test, with the claim's methods
    for sc in third_scenarios.SCENARIOS.values():
        assert sc.claim in claims.THIRD_CLAIMS and sc.algorithms == CLAIMS[sc.claim].methods
    assert CLAIMS["hetero"].methods[0] == CLAIMS["hetero"].reference == "malenia_nigt"


def test_each_row_names_scenarios_of_its_own_claim_or_the_lead_growth():
    for claim in CLAIMS.values():
        for row in claim.rows:
            for name in row.scenarios:
                if name.endswith("_gap"):
                    assert name.removesuffix("_gap") in GROWTH.envs
                    continue
                assert third_scenarios.SCENARIOS[name].claim == claim.name, (row.name, name)
    assert ROWS[0].name == "Equal compute and communication"
    assert len({r.name for r in ROWS}) == len(ROWS) == 6


def test_the_fourth_edition_runs_point_masss_rows_by_default():
    assert fourth.NAMES == claims.row_scenarios("point_mass")
    assert set(fourth.NAMES) == {
        "point_mass_equal",
        "point_mass_sqrt",
        "point_mass_sqrt_dim",
        "point_mass_n100",
        "point_mass_hetero",
    }


def test_an_undeclared_setting_or_a_claim_declared_twice_is_refused():
    with pytest.raises(KeyError, match="no claim declares the setting 'sideways'"):
        claims.claim_of("sideways")
    twice = (CLAIMS["equal"], CLAIMS["equal"])
    with pytest.raises(ValueError, match="declared twice"):
        claims._by_name(twice)
