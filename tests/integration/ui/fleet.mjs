// The browser half of test_ui_fleet_browser.sh: logs in, opens the Fleet
// view, waits for the held request of a node, reads the nodes' table and the
// node filter, clicks Allow once, and reads the timeline under the filter.
// Prints one JSON object of what it saw.
// usage: node fleet.mjs URL TITLE NODE
import { launch, until } from "./browser.mjs";

const [url, title, node] = process.argv.slice(2);
const seen = {};
const { browser, close } = await launch();
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  await page.goto(url, { waitUntil: "load" });
  seen.tab_shown = await until(page, () => {
    const b = document.getElementById("fleet-tab");
    return b && !b.hidden;
  });
  await page.click(`#tabs button[data-view="fleet"]`);
  seen.card = await until(page, (t) => {
    for (const card of document.querySelectorAll("#fl-pending .card"))
      if (card.querySelector("h3").textContent === t) return card.textContent;
    return null;
  }, title);
  seen.count_badge = await page.$eval("#fl-count", (e) => e.textContent);
  seen.filter = await page.$$eval("#fl-node option", (o) => o.map((e) => e.value));
  seen.nodes = await page.$$eval("#fl-nodes tbody tr", (rows) =>
    rows.map((tr) => [...tr.cells].map((c) => c.textContent)));
  // The filter on the other node: the card goes; back on the node: it returns.
  const other = seen.filter.find((v) => v !== "" && v !== node);
  await page.select("#fl-node", other);
  seen.other_has_none = await until(page, () => document.querySelectorAll("#fl-pending .card").length === 0 &&
    !document.getElementById("fl-none").hidden);
  await page.select("#fl-node", node);
  await until(page, () => document.querySelectorAll("#fl-pending .card").length === 1);
  await page.click(`#fl-pending .card button[data-action="once"]`);
  seen.card_gone = await until(page, () => document.querySelectorAll("#fl-pending .card").length === 0);
  seen.errors = await page.$eval("#fl-errors", (e) => e.textContent);
  seen.timeline_nodes = await until(page, () => {
    const cells = [...document.querySelectorAll("#fl-rows tbody tr")].map((tr) => tr.cells[0].textContent);
    return cells.length > 0 && [...new Set(cells)].join(" ");
  });
  await page.setViewport({ width: 400, height: 800 });
  await new Promise((r) => setTimeout(r, 300));
  seen.overflow_400 = await page.evaluate(() => document.documentElement.scrollWidth);
} catch (e) {
  seen.error = String(e && e.stack ? e.stack : e);
} finally {
  await close();
}
console.log(JSON.stringify(seen));
