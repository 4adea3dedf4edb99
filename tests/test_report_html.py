"""The HTML report in a real headless browser (Debian's chromium): it
renders without console errors, fetches nothing, and every chart's SVG has
drawn, visible shapes. A screenshot is kept for a person to look at
($HWTUNE_REPORT_SCREENSHOT names where; default: the test's tmp dir).

CI installs the browser with: apt-get install -y chromium"""

import json
import os
import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli

from test_report_fixture import fixture_db  # noqa: F401 (a pytest fixture)

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no chromium on PATH: apt-get install -y chromium")

FLAGS = ["--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0", "--no-first-run", "--disable-extensions",
         # Offline: any host name a page might name fails to resolve.
         "--host-resolver-rules=MAP * ~NOTFOUND"]

# Injected into a copy of the page (the report itself has no script): what
# the browser laid out, per chart, and what it fetched, written into the DOM
# that --dump-dom prints (at 'load': every resource has finished by then).
PROBE = r"""<script>
window.addEventListener('load', function () {
  var shapes = 'path,rect,circle,line,polyline,polygon';
  var charts = Array.prototype.map.call(document.querySelectorAll('svg.chart'), function (s) {
    var box = s.getBoundingClientRect(), drawn = 0;
    s.querySelectorAll(shapes).forEach(function (el) {
      var b = el.getBBox();
      if ((b.width > 0 || b.height > 0) && getComputedStyle(el).display !== 'none') drawn++;
    });
    return {id: s.getAttribute('data-chart'), w: box.width, h: box.height, drawn: drawn,
            texts: s.querySelectorAll('text').length};
  });
  // What a page can fetch: resources already timed, plus every reference
  // the browser resolved in the DOM and in computed styles (file:// loads
  // are not always in the resource timeline).
  var fetched = performance.getEntriesByType('resource').map(function (r) { return r.name; });
  document.querySelectorAll('*').forEach(function (el) {
    ['src', 'srcset', 'href', 'xlink:href', 'data', 'poster', 'action'].forEach(function (a) {
      var v = el.getAttribute(a);
      if (v && v.charAt(0) !== '#') fetched.push(v);
    });
    var cs = getComputedStyle(el);
    ['backgroundImage', 'listStyleImage', 'borderImageSource', 'cursor', 'maskImage',
     'content'].forEach(function (p) {
      if (cs[p] && cs[p].indexOf('url(') >= 0) fetched.push(cs[p]);
    });
  });
  Array.prototype.forEach.call(document.styleSheets, function (sh) {
    if (sh.href) fetched.push(sh.href);
    Array.prototype.forEach.call(sh.cssRules, function (r) {
      if (r.href || /url\(/.test(r.cssText)) fetched.push(r.cssText);
    });
  });
  var pre = document.createElement('pre');
  pre.id = 'hwtune-probe';
  pre.textContent = JSON.stringify({charts: charts, fetched: fetched});
  document.body.appendChild(pre);
});
</script>"""


def browse(page, *extra, timeout=90):
    proc = subprocess.run([BROWSER, *FLAGS, *extra, page.as_uri()], capture_output=True,
                          text=True, timeout=timeout)
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    return proc, console


def probe(html_path, tmp_path):
    probed = tmp_path / f"probe-{html_path.name}"
    probed.write_text(html_path.read_text().replace("</body>", PROBE + "</body>"))
    proc, console = browse(probed, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<pre id="hwtune-probe">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stdout[-2000:]
    text = m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">") \
        .replace("&amp;", "&")
    return json.loads(text), console


@pytest.fixture(scope="module")
def report_html(fixture_db, tmp_path_factory):
    path, hosts = fixture_db
    out = tmp_path_factory.mktemp("html") / "report.html"
    result = CliRunner().invoke(cli, ["report", "--db", str(path), "--host", hosts["a"],
                                      "--format", "html", "-o", str(out),
                                      "--compare", hosts["b"]])
    assert result.exit_code == 0, result.output
    return out


def test_the_harness_sees_console_errors_and_fetches(tmp_path):
    # Negative control: a page with an error and a fetched image must fail
    # the checks the report passes below.
    (tmp_path / "dot.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><img src='dot.svg'>"
                   "<svg class='chart' data-chart='empty' width='100' height='50'></svg>"
                   "<svg width='10' height='10'><rect width='-5' height='5'/></svg>"
                   "<script>console.error('boom')</script></body></html>")
    got, console = probe(bad, tmp_path)
    assert any("boom" in ln for ln in console)
    assert any("attribute width" in ln for ln in console)  # the browser's SVG complaint
    assert any(f.endswith("dot.svg") for f in got["fetched"])
    assert got["charts"] == [{"id": "empty", "w": 100, "h": 50, "drawn": 0, "texts": 0}]


def test_report_renders_without_console_errors_or_fetches(report_html, tmp_path):
    got, console = probe(report_html, tmp_path)
    assert console == []
    assert got["fetched"] == []
    ids = [c["id"] for c in got["charts"]]
    for want in ("gemm-64x512x512", "eltwise-mul", "eltwise-relu", "corun-gemm",
                 "candidates-tiny-cnn", "convergence-tiny-cnn", "top-ops-tiny-cnn",
                 "timeline-tiny-cnn", "history-gemm-64x512x512-top", "compare-ratios",
                 "compare-gemm-64x512x512"):
        assert want in ids, want
    for c in got["charts"]:
        assert c["w"] > 100 and c["h"] > 100, c
        assert c["drawn"] >= 3 and c["texts"] >= 3, c


def test_screenshot_for_a_person_to_look_at(report_html, tmp_path):
    shot = os.environ.get("HWTUNE_REPORT_SCREENSHOT") or str(tmp_path / "report.png")
    proc, console = browse(report_html, f"--screenshot={shot}", "--window-size=1100,2400")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console == []
    data = open(shot, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # A blank page compresses to a few KiB; text, tables and charts do not.
    assert len(data) > 60_000, len(data)


def test_ticks_of_a_range_below_float_resolution_end():
    """A convergence curve of 100 * x / x can read 100.0 and
    99.99999999999997: the ticks of that range are a handful, and the chart
    draws (nice_ticks looped forever on it: the CI's README report hung)."""
    from hwtune.report import svg
    for lo, hi in ((99.99999999999997, 100.0), (1000.0, 1000.0000000001), (5.0, 5.0),
                   (0.0, 0.0), (-3.0, -3.0 + 1e-15)):
        ticks = svg.nice_ticks(lo, hi)
        assert 2 <= len(ticks) <= 12 and ticks[0] <= lo and ticks[-1] >= hi, (lo, hi, ticks)
    chart = svg.line_chart("c", "flat", [{"name": "a", "xs": [1, 2, 3],
                                          "ys": [100.0, 100.0, 99.99999999999997]}],
                           x_label="trial", y_label="%", y_zero=False)
    assert chart.startswith("<svg") and chart.endswith("</svg>")
