"""The HTML report in a real headless browser (Chromium from Debian's packages): its script runs and
the layer filter hides the rows that do not match. Skips without Chromium, unless
BENANZA_REQUIRE_BROWSER=1 (set by .ci/run, which installs it)."""
import json
import os
import re
import shutil
import subprocess

import pytest

from benanza.reports.report import render_html
from conftest import REPO

NATIVE = REPO / "tests" / "data" / "h200_native" / "vit_b_16-b32-fp16"
BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)

if BROWSER is None:
    if os.environ.get("BENANZA_REQUIRE_BROWSER"):
        raise RuntimeError("BENANZA_REQUIRE_BROWSER is set but no chromium is installed")
    pytest.skip("no headless browser (apt-get install chromium) for the HTML report test", allow_module_level=True)

#: run after the page's own script: record errors, type into the filter as a user does, count rows
PROBE = """<script>
window.bzErrors = window.bzErrors || [];
document.addEventListener('DOMContentLoaded', function () {
  var out = {errors: window.bzErrors, hasFilter: typeof bzFilter === 'function'};
  var inp = document.querySelector('input[oninput]');
  var rows = document.getElementById('layertab').tBodies[0].rows;
  out.rows = rows.length;
  inp.value = QUERY;
  inp.dispatchEvent(new Event('input', {bubbles: true}));
  var shown = [];
  for (var i = 0; i < rows.length; i++) { if (rows[i].style.display !== 'none') shown.push(rows[i].cells[1].textContent); }
  out.shown = shown;
  document.body.setAttribute('data-probe', JSON.stringify(out));
});
</script>"""


def _probe(tmp_path, d: dict, query: str) -> dict:
    html = render_html(d)
    catch = "<script>window.bzErrors=[];window.onerror=function(m){window.bzErrors.push(String(m));};</script>"
    html = html.replace("<head>", "<head>" + catch, 1).replace("</body>", PROBE.replace("QUERY", json.dumps(query)) + "</body>")
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    r = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"data-probe=\"([^\"]*)\"", r.stdout)
    assert m, r.stderr[-2000:]
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def test_the_script_runs_and_the_layer_filter_filters(tmp_path):
    d = json.loads((NATIVE / "report.json").read_text())
    name = d["layers"][5]["name"]
    got = _probe(tmp_path, d, name)
    assert got["errors"] == [] and got["hasFilter"]
    assert got["rows"] == len(d["layers"]) > 10
    assert got["shown"] and all(name.lower() in s.lower() for s in got["shown"]) and len(got["shown"]) < got["rows"]


def test_a_hostile_layer_name_stays_text_in_the_browser(tmp_path):
    d = json.loads((NATIVE / "report.json").read_text())
    d["layers"][0]["name"] = "</script><script>window.bzErrors.push('injected')</script>x"
    got = _probe(tmp_path, d, "x")
    assert "injected" not in got["errors"] and got["errors"] == []
