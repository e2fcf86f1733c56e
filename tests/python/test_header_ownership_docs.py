"""Every public C header says who owns what and which calls are thread-safe.

A C user of libstrideweave reads the headers, not the sources: each one
states what a returned pointer or handle obliges the caller to free (or
that nothing is kept), and which functions may run on several threads at
once. Handles without a _ref/_unref pair say why they are single-owner."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEADERS = ROOT / "include" / "strideweave"

# Headers whose leading comment carries the labelled statements.
LABELLED = ["clock.h", "copy.h", "dtype.h", "layout.h", "status.h", "tiles.h",
            "strideweave.h", "executor.h"]


def leading_comment(name):
    text = (HEADERS / name).read_text()
    m = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    assert m, f"{name} has no leading comment"
    # Without the leading " * " of each line, so sentences read across lines.
    return " ".join(re.sub(r"^\s*\*", "", line).strip() for line in m.group(1).splitlines())


@pytest.mark.parametrize("name", LABELLED)
def test_header_states_ownership_and_thread_safety(name):
    comment = leading_comment(name)
    assert re.search(r"\bOwnership\b", comment), f"{name}: no ownership statement"
    assert re.search(r"\bThreads?\b", comment), f"{name}: no thread-safety statement"


@pytest.mark.parametrize("name, handle", [("executor.h", "sw_executor"),
                                          ("executor.h", "sw_completion"),
                                          ("layout.h", "sw_layout")])
def test_handle_without_refcount_says_it_is_single_owner(name, handle):
    text = (HEADERS / name).read_text()
    has_ref = re.search(rf"\b{handle}_ref\b", text) and re.search(rf"\b{handle}_unref\b", text)
    comment = leading_comment(name)
    says_single = f"{handle} is single-owner" in comment
    assert has_ref or says_single, f"{handle}: neither _ref/_unref nor a single-owner statement"
