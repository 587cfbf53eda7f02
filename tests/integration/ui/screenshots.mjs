// Screenshots of the review page's three main views at 1280x800 (and the
// waiting view at 400 px) for docs/ui.md; run by scripts/ui-screenshots.
// usage: node screenshots.mjs URL OUTDIR
import { launch, until } from "./browser.mjs";
import path from "node:path";

const [url, outdir] = process.argv.slice(2);
const { browser, close } = await launch();
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  await page.goto(url, { waitUntil: "load" });
  const shot = (name) => page.screenshot({ path: path.join(outdir, name) });

  await until(page, () => document.querySelectorAll("#pending .card").length > 0);
  await shot("ui-waiting.png");

  // The timeline of the sandbox with the most rows.
  await page.click(`#tabs button[data-view="timeline"]`);
  await until(page, () => document.querySelectorAll("#tl-sandbox option").length > 0);
  await page.evaluate(() => {
    const sel = document.getElementById("tl-sandbox");
    const rows = (o) => Number((o.textContent.match(/\((\d+)\)$/) || [0, 0])[1]);
    const best = [...sel.options].sort((a, b) => rows(b) - rows(a))[0];
    sel.value = best.value;
    sel.dispatchEvent(new Event("change"));
  });
  await until(page, () => document.querySelectorAll("#tl-chart circle").length > 0);
  await shot("ui-timeline.png");

  await page.click(`#tabs button[data-view="search"]`);
  await page.type(`#search-form input[name="host"]`, "*.test");
  await page.click(`#search-form button[type="submit"]`);
  await until(page, () => document.querySelectorAll("#search-rows tbody tr").length > 0);
  // Clicking a row shows it whole: the refused one.
  await page.evaluate(() => {
    const rows = [...document.querySelectorAll("#search-rows tbody tr")];
    (rows.find((tr) => tr.cells[6].textContent === "deny") || rows[0]).click();
  });
  await until(page, () => !document.getElementById("detail").hidden);
  await shot("ui-search.png");
  await page.click("#detail-close");

  await page.setViewport({ width: 400, height: 800 });
  await page.click(`#tabs button[data-view="waiting"]`);
  await new Promise((r) => setTimeout(r, 300));
  await shot("ui-narrow.png");
} finally {
  await close();
}
