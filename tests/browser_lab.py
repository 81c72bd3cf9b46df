"""The course as a learner meets it: JupyterLab in headless Chromium (run by `make test-browser`, not by `make test`).

Opens the student notebooks of labs 04 and 01 in a real JupyterLab, runs them, moves the pipeline explorer's sliders
and checks that its chart was redrawn, presses "run it for real" and waits for the measured chart, and checks that
lab 01's progress bar renders and reaches 100 %. Browser console errors and kernel errors (other than the exercise
stubs' NotImplementedError) fail the test. Screenshots go to build/browser/. The server and the browser are stopped
afterwards whatever happened.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

selenium = pytest.importorskip("selenium", reason="make test-browser installs selenium")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

from lab_utils.launch import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "build" / "browser"
CHROMIUM, DRIVER = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a free loopback port with a token, serving a copy of notebooks/; stopped afterwards."""
    if not (CHROMIUM and DRIVER):
        pytest.fail("headless Chromium is needed: apt-get install chromium chromium-driver")
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    port, token = free_port(), secrets.token_hex(16)
    log = open(root / "jupyter.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
                               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
                               f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
                               "--ServerApp.port_retries=0", "--ServerApp.allow_root=True"],  # CI runs as root
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                              env={**os.environ, "JUPYTER_RUNTIME_DIR": str(root / "runtime")})
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            if time.monotonic() > deadline or server.poll() is not None:
                pytest.fail(f"JupyterLab did not start: {(root / 'jupyter.log').read_text()[-2000:]}")
            time.sleep(0.5)
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1800"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
        try:
            yield {"driver": driver, "url": url, "token": token, "root": root}
        finally:
            driver.quit()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def js(driver, script, *args):
    return driver.execute_script(script, *args)


def wait_for(condition, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def open_and_run_all(lab, relative: str, timeout: float = 300):
    """Open a notebook in JupyterLab, run all its cells, wait until the kernel is idle again."""
    driver = lab["driver"]
    driver.get(f"{lab['url']}/lab/tree/{relative}?token={lab['token']}&reset")
    wait_for(lambda: js(driver, "return !!(window.jupyterapp && window.jupyterapp.shell.currentWidget "
                                "&& window.jupyterapp.shell.currentWidget.sessionContext "
                                "&& window.jupyterapp.shell.currentWidget.sessionContext.session "
                                "&& window.jupyterapp.shell.currentWidget.sessionContext.session.kernel)"),
             120, f"{relative} to open with a kernel")
    status = "return window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status"
    wait_for(lambda: js(driver, status) == "idle", 120, "the kernel to start")
    js(driver, "window.jupyterapp.commands.execute('notebook:run-all-cells')")
    wait_for(lambda: js(driver, status) == "busy", 30, "the cells to start running", 0.2)
    wait_for(lambda: js(driver, status) == "idle", timeout, "the cells to finish")


def kernel_errors(driver) -> list[str]:
    """Error outputs of the open notebook, other than the exercise stubs' NotImplementedError."""
    return js(driver, """
        const nb = window.jupyterapp.shell.currentWidget.content.model;
        const errors = [];
        for (let i = 0; i < nb.cells.length; i++) {
            const cell = nb.cells.get(i);
            if (cell.type !== 'code') continue;
            for (let j = 0; j < cell.outputs.length; j++) {
                const out = cell.outputs.get(j).toJSON();
                if (out.output_type === 'error' && out.ename !== 'NotImplementedError')
                    errors.push('cell ' + i + ': ' + out.ename + ': ' + out.evalue);
            }
        }
        return errors;""")


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]]


def shot(driver, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def slider(driver, label: str):
    """The ipywidgets slider whose description is `label`."""
    for box in driver.find_elements(By.CSS_SELECTOR, ".widget-slider"):
        if box.find_elements(By.CSS_SELECTOR, ".widget-label") and \
                box.find_element(By.CSS_SELECTOR, ".widget-label").text.strip() == label:
            return box
    raise AssertionError(f"no slider labelled {label!r} on the page")


def chart_source(driver) -> str:
    """The image the explorer's chart shows now (its data URI or blob URL): an Image widget, or an image in an Output."""
    images = driver.find_elements(By.CSS_SELECTOR, "img.widget-image, .widget-output img, .jupyter-widgets-output-area img")
    return images[-1].get_attribute("src") if images else ""


def set_slider(driver, label: str, value: int) -> None:
    readout = slider(driver, label).find_element(By.CSS_SELECTOR, ".widget-readout")
    readout.click()
    readout.send_keys(Keys.CONTROL, "a")
    readout.send_keys(str(value), Keys.ENTER)


def explorer_redraws(driver, label: str, value: int, timeout: float = 30) -> bool:
    """Move a slider; True when the chart's image changed."""
    before = chart_source(driver)
    set_slider(driver, label, value)
    try:
        wait_for(lambda: chart_source(driver) not in ("", before), timeout, "the chart to be redrawn")
    except AssertionError:
        return False
    return True


def test_lab04_explorer_redraws_and_runs_for_real(lab):
    driver = lab["driver"]
    open_and_run_all(lab, "notebooks/04_model_parallel_pipeline.ipynb")
    wait_for(lambda: chart_source(driver), 60, "the explorer's first chart")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", slider(driver, "stages K"))
    shot(driver, "lab04-explorer-before")
    assert explorer_redraws(driver, "micro-batches M", 8), "moving the micro-batches slider did not redraw the chart"
    assert explorer_redraws(driver, "stages K", 1), "moving the stages slider did not redraw the chart"  # max: the cores
    shot(driver, "lab04-explorer-after-sliders")
    set_slider(driver, "stages K", 2)
    before = chart_source(driver)
    button = next(b for b in driver.find_elements(By.CSS_SELECTOR, "button") if b.text.strip() == "run it for real")
    button.click()
    status = lambda: " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, ".widget-html-content"))  # noqa: E731
    wait_for(lambda: "measured:" in status() or "failed" in status(), 180, "the real pipeline run")
    assert "measured:" in status(), status()
    wait_for(lambda: chart_source(driver) != before, 30, "the measured chart")
    shot(driver, "lab04-explorer-measured")
    assert kernel_errors(driver) == []
    assert console_errors(driver) == []


def scroll_to_cell(driver, text: str) -> None:
    """Bring the first cell whose source contains `text` into view (JupyterLab renders only the cells near the view)."""
    found = js(driver, """
        const nb = window.jupyterapp.shell.currentWidget.content;
        for (let i = 0; i < nb.model.cells.length; i++) {
            if (nb.model.cells.get(i).sharedModel.getSource().includes(arguments[0])) {
                nb.activeCellIndex = i;
                nb.scrollToItem(i, 'center');
                return true;
            }
        }
        return false;""", text)
    assert found, f"no cell contains {text!r}"


def html_text(driver) -> str:
    """The text of every HTML widget now, read again when the page redraws one while it is read (a stale element)."""
    for _ in range(5):
        try:
            return " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, ".widget-html-content"))
        except StaleElementReferenceException:
            continue
    return ""


def test_lab01_progress_bar_renders_and_finishes(lab):
    driver = lab["driver"]
    open_and_run_all(lab, "notebooks/01_single_device_cnn.ipynb")
    scroll_to_cell(driver, "history = train.fit(")
    find_bars = lambda: driver.find_elements(By.CSS_SELECTOR, ".widget-hprogress, .widget-progress")  # noqa: E731
    wait_for(find_bars, 30, "a progress bar widget")
    labels = lambda: html_text(driver)  # noqa: E731
    with contextlib.suppress(AssertionError):  # the kernel goes idle before the page has applied its last widget update
        wait_for(lambda: "100%" in labels(), 15, "the bar's last update")
    assert "100%" in labels(), f"the progress bar did not reach 100 %: {labels()[:300]!r}"
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", find_bars()[0])  # redrawn: found anew
    shot(driver, "lab01-progress-bar")
    assert kernel_errors(driver) == []
    assert console_errors(driver) == []


def test_a_broken_explorer_is_caught(lab):
    """The redraw check itself fails when the widget's callback raises (so it can catch a real breakage)."""
    driver = lab["driver"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import ipywidgets as w\nimport matplotlib.pyplot as plt\nfrom IPython.display import display\n"
        "k = w.IntSlider(value=2, min=1, max=4, description='stages K')\nchart = w.Output()\n"
        "def draw(*_):\n    with chart:\n        chart.clear_output(wait=True)\n        plt.plot([1, k.value]); plt.show()\n"
        "def broken(change):\n    raise RuntimeError('the explorer cannot redraw')\n"
        "draw()\nk.observe(broken, names='value')\ndisplay(w.VBox([k, chart]))")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab["root"] / "notebooks" / "broken_explorer.ipynb")
    open_and_run_all(lab, "notebooks/broken_explorer.ipynb", timeout=60)
    wait_for(lambda: chart_source(driver), 30, "the first chart")
    assert not explorer_redraws(driver, "stages K", 3, timeout=10)
    shot(driver, "broken-explorer")
