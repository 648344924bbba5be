"""The stepper in a real browser: notebook 6 in JupyterLab, driven by headless Chromium.

The notebook runs top to bottom; then the test clicks through its last panel
("Your turn", a fresh team) the way a student would: submit a plan, see the
pass blocked, approve the plan, step both teammates through their claims and
approval requests, shut one down. Nothing on the whole page may show an
error: no error output, no stderr, no traceback, no broken widget.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from browser_harness import (  # noqa: F401 (provides the `lab` fixture)
    ARTIFACTS,
    LabSession,
    copy_notebook,
    decode_data_url,
    lab_fixture,
)

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "06_the_idle_loop.ipynb"
SVG_IMAGE = ".widget-output [data-mime-type='image/svg+xml'] img"
STDERR = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
WAIT_MS = 30_000


class Panel:
    """The notebook's last stepper panel: the last output area with a "step alice" button."""

    def __init__(self, lab: LabSession) -> None:
        self.lab = lab
        page = lab.page
        self.area = (
            page.locator(".jp-OutputArea-output")
            .filter(has=page.get_by_role("button", name="step alice", exact=True))
            .last
        )
        self.area.wait_for(state="visible", timeout=WAIT_MS)

    def button(self, label: str) -> Any:
        return self.area.get_by_role("button", name=label, exact=True)

    def click(self, label: str) -> None:
        button = self.button(label)
        button.scroll_into_view_if_needed()
        self.wait_until_enabled(label)
        button.click()

    def is_enabled(self, label: str) -> bool:
        return bool(self.button(label).is_enabled())

    def wait_until_enabled(self, label: str) -> None:
        self.button(label).element_handle(timeout=WAIT_MS).wait_for_element_state(
            "enabled", timeout=WAIT_MS
        )

    def wait_until_disabled(self, label: str) -> None:
        self.button(label).element_handle(timeout=WAIT_MS).wait_for_element_state(
            "disabled", timeout=WAIT_MS
        )

    def wait_for_text(self, text: str) -> None:
        """Wait until the panel's visible text contains `text`."""
        self.lab.page.wait_for_function(
            "([area, text]) => area.innerText.includes(text)",
            arg=[self.area.element_handle(timeout=WAIT_MS), text],
            timeout=WAIT_MS,
        )

    def text(self) -> str:
        return str(self.area.inner_text())

    def board_svg(self) -> str:
        source = self.area.locator(SVG_IMAGE).last.get_attribute("src", timeout=WAIT_MS)
        assert source is not None, "the panel's board picture has no src"
        return decode_data_url(source)

    def wait_for_board(self, text: str) -> str:
        """Wait until the panel's board picture contains `text`; return the SVG."""
        self.lab.page.wait_for_function(
            """([area, selector, text]) => {
                const images = area.querySelectorAll(selector);
                const last = images[images.length - 1];
                return Boolean(last) && decodeURIComponent(last.src).includes(text);
            }""",
            arg=[self.area.element_handle(timeout=WAIT_MS), SVG_IMAGE, text],
            timeout=WAIT_MS,
        )
        return self.board_svg()

    def step_through_claim(self, name: str) -> None:
        """Step `name` once and, if the pass parks on an approval request, approve it."""
        done = f"last step: {name}: claimed"
        self.click(f"step {name}")
        self.lab.page.wait_for_function(
            """([area, done]) => {
                const approve = [...area.querySelectorAll('button')]
                    .find(button => button.innerText.trim() === 'approve request');
                return area.innerText.includes(done) || Boolean(approve && !approve.disabled);
            }""",
            arg=[self.area.element_handle(timeout=WAIT_MS), done],
            timeout=WAIT_MS,
        )
        if done not in self.text():
            self.click("approve request")  # the note the teammate's model asks to write
            self.wait_for_text(done)


def errors_on_the_page(lab: LabSession) -> list[str]:
    """Every sign of an error anywhere on the page, in words."""
    found = [f"error output: {error}" for error in lab.error_outputs()]
    found += [f"stderr: {text}" for text in lab.page.locator(STDERR).all_inner_texts()]
    page_text = lab.page.locator("body").inner_text()
    for sign in ("Traceback (most recent call last)", "Error displaying widget"):
        if sign in page_text:
            found.append(f"the page shows {sign!r}")
    return found


@pytest.mark.browser
def test_a_student_clicks_through_the_last_stepper_of_notebook_6_without_any_error(
    lab: LabSession,
) -> None:
    # The notebook reads its diagram from ../assets, next to the served folder.
    shutil.copytree(REPO / "assets", lab.root_dir.parent / "assets")
    lab.open_notebook(copy_notebook(NOTEBOOK, lab.root_dir))
    lab.run_all_cells()
    panel = Panel(lab)
    before = panel.wait_for_board("READY")
    assert "alice" not in before
    assert errors_on_the_page(lab) == []

    # The plan gate: a pending plan stops alice's pass; the Lead approves; she reads it.
    panel.click("submit plan")
    panel.wait_for_text("plan pending")
    panel.click("step alice")
    panel.wait_for_text("last step: alice: plan_blocked")
    assert panel.board_svg() == before  # a blocked pass writes nothing to the board
    panel.click("approve plan")
    panel.wait_until_disabled("approve plan")
    panel.click("step alice")
    panel.wait_for_text("(plan approved); no task taken")

    # Both teammates claim (approving the notes their models ask to write) and finish.
    panel.step_through_claim("alice")
    panel.wait_for_board("completed · alice")
    panel.step_through_claim("bob")
    both = panel.wait_for_board("completed · bob")
    assert "completed · alice" in both
    ARTIFACTS.mkdir(exist_ok=True)
    panel.area.screenshot(path=str(ARTIFACTS / "browser_stepper.png"))

    # C, ready now, goes to exactly one of them.
    panel.step_through_claim("alice")
    assert panel.board_svg().count("completed · alice") == 2

    # The Lead asks alice (the teammate chosen in "to") to shut down; her button goes quiet.
    panel.click("request shutdown")
    panel.click("step alice")
    panel.wait_for_text("protocol_handled shutdown_request")
    panel.wait_until_disabled("step alice")
    panel.wait_for_text("closed (shut down)")
    panel.click("advance clock")
    panel.click("step bob")
    panel.wait_for_text("last step: bob: idle")

    assert errors_on_the_page(lab) == []
    lab.check_page_errors()
    assert lab.screenshot("browser_stepper_page.png").stat().st_size > 0
