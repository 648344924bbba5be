"""The stepper in a real browser: notebook 6 in JupyterLab, driven by headless Chromium.

The notebook runs top to bottom; then the test clicks the buttons of its last
panel ("Your turn", a fresh team) the way a student would, and reads the
board back from the SVG that the browser shows in the widget's Output.
"""

from __future__ import annotations

import shutil
from pathlib import Path

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
SVG_IMAGES = ".widget-output [data-mime-type='image/svg+xml'] img"
WAIT_MS = 30_000


def click_last(lab: LabSession, description: str) -> None:
    """Click the last button called `description` (the notebook's last panel)."""
    button = lab.page.get_by_role("button", name=description, exact=True).last
    button.wait_for(state="visible", timeout=WAIT_MS)
    button.click()


def wait_for_last_svg(lab: LabSession, text: str) -> str:
    """Wait until the last Output SVG on the page contains `text`; return that SVG."""
    lab.page.wait_for_function(
        """([selector, text]) => {
            const images = document.querySelectorAll(selector);
            const last = images[images.length - 1];
            return Boolean(last) && decodeURIComponent(last.src).includes(text);
        }""",
        arg=[SVG_IMAGES, text],
        timeout=WAIT_MS,
    )
    source = lab.page.locator(SVG_IMAGES).last.get_attribute("src")
    assert source is not None
    return decode_data_url(source)


@pytest.mark.browser
def test_clicking_step_alice_in_notebook_6_redraws_the_board_with_a_done_by_alice(
    lab: LabSession,
) -> None:
    # The notebook reads its diagram from ../assets, next to the served folder.
    shutil.copytree(REPO / "assets", lab.root_dir.parent / "assets")
    lab.open_notebook(copy_notebook(NOTEBOOK, lab.root_dir))
    lab.run_all_cells()
    before = wait_for_last_svg(lab, "the board at 09:00:00Z")
    assert "READY" in before
    assert "alice" not in before

    click_last(lab, "step alice")
    after = wait_for_last_svg(lab, "completed · alice")
    assert after != before
    assert "#bfe6d8" in after  # the completed fill

    click_last(lab, "step bob")
    lab.page.get_by_text("bob asks to write notes/", exact=False).last.wait_for(
        state="visible", timeout=WAIT_MS
    )
    held = wait_for_last_svg(lab, "in_progress · bob")
    assert "lease until 09:05:00Z" in held
    panel = lab.page.locator(".widget-vbox").last
    panel.scroll_into_view_if_needed()
    ARTIFACTS.mkdir(exist_ok=True)
    panel.screenshot(path=str(ARTIFACTS / "browser_stepper.png"))

    click_last(lab, "approve request")
    done = wait_for_last_svg(lab, "completed · bob")
    assert "completed · alice" in done
    assert lab.error_outputs() == []
    lab.check_page_errors()
    assert lab.screenshot("browser_stepper_page.png").stat().st_size > 0
