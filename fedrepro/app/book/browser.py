"""Open built pages in headless Chromium (Debian's ``chromium`` and ``chromium-driver``) as a reader
would, and report what a reader would notice: console errors, images that did not load, anything
fetched from the network, whether a claims table is there, and figures cut at their right edge or
shrunk with no way to open them at full size. Saves a screenshot of each page."""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = ("/usr/bin/chromium", "chromium", "chromium-browser")
CHROMEDRIVER = ("/usr/bin/chromedriver", "chromedriver")

# Every <img> with whether it loaded; every resource the page fetched; the headers of its tables.
_PAGE_STATE = r"""
return {
  images: Array.from(document.images).map(i => ({src: i.currentSrc || i.src, ok: i.complete && i.naturalWidth > 0})),
  resources: performance.getEntriesByType('resource').map(r => r.name),
  tables: Array.from(document.querySelectorAll('table')).map(
      t => Array.from(t.querySelectorAll('th')).map(h => h.textContent.trim())),
  height: Math.max(document.body.scrollHeight, document.documentElement.scrollHeight),
  overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  // Claims tables wider than the box that would scroll them: a column a reader cannot see.
  cut_tables: Array.from(document.querySelectorAll('table')).filter(
      t => Array.from(t.querySelectorAll('th')).some(h => h.textContent.trim().toLowerCase() === 'verdict')
           || t.classList.contains('claims-table')).map(t => {
    let box = t.parentElement;
    while (box && box.parentElement && getComputedStyle(box).overflowX === 'visible') box = box.parentElement;
    return {width: t.scrollWidth, room: box ? box.clientWidth : t.scrollWidth};
  }).filter(x => x.width > x.room + 2).map(x => x.width - x.room),
  // The width of the column the text is set in, code wider than its box, and figures drawn
  // smaller than saved (their text then falls below the size it was checked at).
  content_px: (document.querySelector('article') || document.body).clientWidth,
  clipped_code: Array.from(document.querySelectorAll('pre')).filter(
      p => p.scrollWidth > p.clientWidth + 2).length,
  shrunk_images: Array.from(document.images).filter(
      i => i.naturalWidth > 0 && i.getBoundingClientRect().width < 0.95 * i.naturalWidth).map(
      i => (i.currentSrc || i.src).split('/').pop()),
  // Of those, the ones a reader cannot open at their saved size: no link around them to their own file.
  unlinked_images: Array.from(document.images).filter(
      i => i.naturalWidth > 0 && i.getBoundingClientRect().width < 0.95 * i.naturalWidth).filter(i => {
    const a = i.closest('a');
    return !a || a.href !== (i.currentSrc || i.src);
  }).map(i => (i.currentSrc || i.src).split('/').pop()),
  // Figures whose right edge a reader does not see without scrolling sideways: past the window, or
  // past the box that clips or scrolls them (a cell output that scrolls hides its right part).
  cut_images: Array.from(document.images).filter(i => i.naturalWidth > 0).map(i => {
    const right = i.getBoundingClientRect().right;
    let room = document.documentElement.clientWidth;
    for (let box = i.parentElement; box && box !== document.documentElement; box = box.parentElement)
      if (getComputedStyle(box).overflowX !== 'visible') room = Math.min(room, box.getBoundingClientRect().right);
    return {name: (i.currentSrc || i.src).split('/').pop(), hidden: right - room};
  }).filter(x => x.hidden > 1).map(x => `${x.name}: ${Math.round(x.hidden)} px`),
  banner: (document.querySelector('.announcement') || {textContent: ''}).textContent.trim(),
  // Claim ids laid out over several lines with a break that does not follow a dot or an underscore.
  broken_ids: Array.from(document.querySelectorAll('table.claims-table td:first-child, table code')).filter(
      e => /^[a-z0-9_]+\.[a-z0-9_]+$/.test(e.textContent.trim())).filter(e => {
    const text = e.textContent, walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT), tops = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode())
      for (let i = 0; i < n.length; i++) {
        const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
        const box = r.getClientRects()[0]; if (box) tops.push(box.top);
      }
    if (tops.length !== text.length) return false;
    for (let i = 1; i < text.length; i++)
      if (tops[i] > tops[i - 1] + 2 && !'._'.includes(text[i - 1])) return true;
    return false;
  }).map(e => e.textContent.trim()),
};
"""


def find(names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that is an executable (an absolute path or a name on PATH)."""
    for n in names:
        if Path(n).is_absolute() and Path(n).is_file():
            return n
        if not Path(n).is_absolute() and shutil.which(n):
            return shutil.which(n)
    return None


@dataclass
class PageReport:
    url: str
    console_errors: list[str] = field(default_factory=list)
    broken_images: list[str] = field(default_factory=list)
    images: int = 0
    remote: list[str] = field(default_factory=list)
    table_headers: list[list[str]] = field(default_factory=list)
    screenshot: Path | None = None
    overflow_px: int = 0  # how far the page runs past the window's width (a reader scrolls sideways)
    cut_tables_px: list[int] = field(default_factory=list)  # per claims table cut by its box: how much is hidden
    content_px: int = 0  # the width of the text column
    clipped_code: int = 0  # code blocks wider than their box
    shrunk_images: list[str] = field(default_factory=list)  # figures drawn smaller than saved
    unlinked_images: list[str] = field(default_factory=list)  # of those, the ones with no link to their full size
    cut_images: list[str] = field(default_factory=list)  # "name: px" of figures whose right edge is out of view
    banner: str = ""  # the announcement on top of every page (a smoke site's warning)
    broken_ids: list[str] = field(default_factory=list)  # claim ids wrapped mid-word

    def has_claims_table(self) -> bool:
        """A table with a verdict column (a claims table) or the verdict counts (PASS, FAIL, ...)."""
        return any(any(h.lower() == "verdict" for h in t) or {"PASS", "FAIL"} <= set(t) for t in self.table_headers)


def open_pages(pages: list[Path], shots: Path, width: int = 1280, max_height: int = 12000) -> list[PageReport]:
    """Open each HTML file in headless Chromium and return what it found; screenshots go to ``shots``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = find(CHROMIUM), find(CHROMEDRIVER)
    if not chromium or not driver_path:
        raise FileNotFoundError("headless Chromium needs Debian's chromium and chromium-driver "
                                "(apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},1000", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    shots.mkdir(parents=True, exist_ok=True)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    reports = []
    try:
        for page in pages:
            url = page.resolve().as_uri()
            driver.get(url)
            driver.execute_script("return document.readyState")  # get() waits for the load event
            state = driver.execute_script(_PAGE_STATE)
            # Resizing reflows the page; measure again until the window holds all of it (or max_height).
            for _ in range(3):
                height = min(max_height, max(800, int(state["height"])))
                driver.set_window_size(width, height)
                state = driver.execute_script(_PAGE_STATE)
                if min(max_height, int(state["height"])) <= height:
                    break
            overflow = int(state["overflow"])
            shot = shots / f"{len(reports):02d}_{page.parent.name}__{page.stem}.png"
            driver.save_screenshot(str(shot))
            driver.set_window_size(width, 1000)
            errors = [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
            reports.append(PageReport(
                url=url, console_errors=errors, images=len(state["images"]),
                broken_images=[i["src"] for i in state["images"] if not i["ok"]],
                remote=[r for r in state["resources"] if not r.startswith("file:")],
                table_headers=state["tables"], screenshot=shot, overflow_px=overflow,
                cut_tables_px=[int(x) for x in state["cut_tables"]], content_px=int(state["content_px"]),
                clipped_code=int(state["clipped_code"]), shrunk_images=list(state["shrunk_images"]),
                unlinked_images=list(state["unlinked_images"]), cut_images=list(state["cut_images"]),
                banner=state["banner"], broken_ids=list(state["broken_ids"])))
    finally:
        driver.quit()
    return reports
