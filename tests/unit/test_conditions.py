"""status.conditions helper keeps transition times honest."""

from __future__ import annotations

from colony.api.conditions import set_condition


def test_new_condition_gets_now() -> None:
    result = set_condition(
        None, type_="Ready", status="False", reason="Waiting", message="m", observed_generation=1, now="T1"
    )
    assert result == [
        {
            "type": "Ready",
            "status": "False",
            "reason": "Waiting",
            "message": "m",
            "lastTransitionTime": "T1",
            "observedGeneration": 1,
        }
    ]


def test_same_status_keeps_transition_time_but_updates_the_rest() -> None:
    first = set_condition(
        None, type_="Ready", status="False", reason="A", message="a", observed_generation=1, now="T1"
    )
    second = set_condition(
        first, type_="Ready", status="False", reason="B", message="b", observed_generation=2, now="T2"
    )
    assert second[0]["lastTransitionTime"] == "T1"
    assert (second[0]["reason"], second[0]["message"], second[0]["observedGeneration"]) == ("B", "b", 2)


def test_status_change_moves_transition_time_and_keeps_other_types() -> None:
    conditions = set_condition(
        None, type_="Ready", status="False", reason="A", message="", observed_generation=1, now="T1"
    )
    conditions = set_condition(
        conditions, type_="Accepted", status="True", reason="Ok", message="", observed_generation=1, now="T1"
    )
    conditions = set_condition(
        conditions, type_="Ready", status="True", reason="Up", message="", observed_generation=1, now="T3"
    )
    assert [c["type"] for c in conditions] == ["Accepted", "Ready"]
    assert conditions[1]["lastTransitionTime"] == "T3"
    assert conditions[0]["lastTransitionTime"] == "T1"
