"""Memory ids: uuid4s whose first byte a run of ids shares (index locality for a batch)."""

from __future__ import annotations

import uuid
from itertools import islice

from cortex.services.ids import RUN, batch_ids


def test_batch_ids_are_uuid4s_in_their_usual_form() -> None:
    for text in islice(batch_ids(), 3 * RUN):
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_a_run_shares_its_first_byte_and_nothing_else() -> None:
    ids = list(islice(batch_ids(), RUN))
    assert len({text[:2] for text in ids}) == 1
    # Past the shared byte the ids are random: 40 more bits tell 1,000 ids apart.
    assert len({text[:13] for text in ids}) == RUN
    assert len({text[2] for text in ids}) == 16


def test_each_run_and_each_batch_draws_its_own_first_byte() -> None:
    ids = list(islice(batch_ids(), 40 * RUN))
    runs = [ids[start : start + RUN] for start in range(0, len(ids), RUN)]
    assert all(len({text[:2] for text in run}) == 1 for run in runs)
    # 40 draws of a random byte give about 37 distinct values.
    assert len({run[0][:2] for run in runs}) > 20
    assert len({next(batch_ids())[:2] for _ in range(40)}) > 20
