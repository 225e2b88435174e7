"""Provenance of a stored result: what it records, and when a stored cell may stand for a new one."""

from rubricgym.app.provenance import KERNEL_FLAGS, machine, provenance, same_provenance


def test_provenance_records_code_config_packages_and_the_machine():
    where = provenance({"steps": 2, "seeds": [0]})
    assert set(where) == {"commit", "config_hash", "packages", "machine"}
    assert where["commit"] and len(where["config_hash"]) == 16 and "torch" in where["packages"]
    cpu = machine()
    assert cpu["cores"] >= 1 and cpu["cpu"] and set(cpu["isa"]) <= set(KERNEL_FLAGS)
    assert where["machine"] == cpu


def test_a_cell_from_a_cpu_with_other_kernels_is_not_reused_but_an_older_cell_without_the_record_is():
    current = provenance({"row": "rlvr", "seed": 1})
    assert same_provenance(current, current)
    other_cpu = {**current, "machine": {**current["machine"], "isa": ["avx2"] if current["machine"]["isa"] != ["avx2"] else []}}
    assert not same_provenance(other_cpu, current)
    # the model name and the core count do not pick kernels: a cell made on a sibling machine stands
    sibling = {**current, "machine": {**current["machine"], "cpu": "another name", "cores": 64}}
    assert same_provenance(sibling, current)
    older = {key: value for key, value in current.items() if key != "machine"}
    assert same_provenance(older, current)
    assert not same_provenance({**current, "packages": {**current["packages"], "peft": "0.0.1"}}, current)
    assert not same_provenance({**current, "commit": "another"}, current)
    assert not same_provenance(None, current) and not same_provenance({}, current)
