// The browser half of test_ui_approve.sh: logs in with the printed address,
// waits for the held request to show, clicks Allow once, then finds the
// connection and an inspected request in the timeline and the approval in
// the search, and measures
// the page at 400 px wide. Prints one JSON object of what it saw.
// usage: node approve.mjs URL HOST
import { launch, until } from "./browser.mjs";

const [url, host] = process.argv.slice(2);
const seen = {};
const { browser, close } = await launch();
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  await page.goto(url, { waitUntil: "load" });
  seen.address_after_login = new URL(page.url()).search; // the token must be gone

  // Waiting for you: the held request appears without a reload.
  seen.card = await until(page, (h) => {
    for (const card of document.querySelectorAll("#pending .card"))
      if (card.querySelector("h3").textContent === h) return card.textContent;
    return null;
  }, host);
  seen.count_badge = await page.$eval("#count", (e) => e.textContent);
  seen.card_command = await page.$eval("#pending .card .command", (e) => e.textContent).catch(() => null);
  // The page's icon: named by the page, served with the session.
  seen.favicon = await page.evaluate(async () => {
    const link = document.querySelector('link[rel="icon"]');
    const r = await fetch(link.href, { credentials: "same-origin" });
    const body = await r.text();
    return { href: new URL(link.href).pathname, status: r.status, type: r.headers.get("content-type"),
      svg: body.startsWith("<svg") };
  });
  await page.click(`#pending .card button[data-action="once"]`);
  seen.card_gone = await until(page, (h) => {
    return ![...document.querySelectorAll("#pending .card h3")].some((e) => e.textContent === h);
  }, host);
  seen.errors = await page.$eval("#pending-errors", (e) => e.textContent);

  // Timeline: the connection shows once the request completed and its row was
  // written; Reload until it does (bounded).
  await page.click(`#tabs button[data-view="timeline"]`);
  for (let i = 0; i < 60 && !seen.timeline_row; i++) {
    await page.click("#tl-reload");
    await new Promise((r) => setTimeout(r, 500));
    seen.timeline_row = await page.evaluate((h) => {
      for (const tr of document.querySelectorAll("#tl-rows tbody tr")) {
        const cells = [...tr.cells].map((c) => c.textContent);
        // A forwarded request's row names it: "GET host/path".
        if (cells[1] === "connection" && (cells[2] === h || cells[2].startsWith("GET " + h + "/")))
          return cells.join(" | ");
      }
      return null;
    }, host);
  }
  // An inspected request's row shows its method, host and path, as text.
  seen.timeline_request = await page.evaluate(() => {
    for (const tr of document.querySelectorAll("#tl-rows tbody tr"))
      if (tr.cells[2].textContent.startsWith("GET api.test/")) return tr.cells[2].textContent;
    return null;
  });
  seen.timeline_markup = await page.$$eval("#tl-rows tbody img, #tl-rows tbody b", (e) => e.length);
  seen.timeline_script_ran = await page.evaluate(() => window.pwned !== undefined);
  await page.evaluate(() => {
    for (const tr of document.querySelectorAll("#tl-rows tbody tr"))
      if (tr.cells[2].textContent.startsWith("GET api.test/")) { tr.click(); return; }
  });
  seen.timeline_request_detail = await until(page, () => {
    const d = document.getElementById("detail");
    return !d.hidden && document.getElementById("detail-facts").textContent;
  });
  await page.click("#detail-close");
  seen.timeline_sandbox = await page.$eval("#tl-sandbox", (e) => e.value);
  seen.timeline_dots = await page.$$eval("#tl-chart circle", (c) => c.length);
  seen.timeline_summary = await page.$eval("#tl-summary", (e) => e.textContent);
  await page.evaluate((h) => {
    for (const tr of document.querySelectorAll("#tl-rows tbody tr"))
      if (tr.cells[1].textContent === "connection" &&
          (tr.cells[2].textContent === h || tr.cells[2].textContent.startsWith("GET " + h + "/"))) { tr.click(); return; }
  }, host);
  seen.timeline_detail = await until(page, () => {
    const d = document.getElementById("detail");
    return !d.hidden && document.getElementById("detail-facts").textContent;
  });
  await page.click("#detail-close");

  // Search: by default (no filter) every kind shows, lifecycle rows too.
  await page.click(`#tabs button[data-view="search"]`);
  await page.click(`#search-form button[type="submit"]`);
  seen.default_kinds = await until(page, () => {
    const kinds = [...document.querySelectorAll("#search-rows tbody tr")].map((tr) => tr.cells[2].textContent);
    return kinds.includes("sandbox.end") && [...new Set(kinds)].sort().join(" ");
  });
  seen.kind_placeholder = await page.$eval(`#search-form input[name="kind"]`, (e) => e.placeholder);
  // Search: the approval row names the page as who decided.
  await page.type(`#search-form input[name="kind"]`, "approval");
  await page.type(`#search-form input[name="host"]`, host);
  await page.click(`#search-form button[type="submit"]`);
  seen.approval_row = await until(page, () => {
    const tr = document.querySelector("#search-rows tbody tr");
    return tr && [...tr.cells].map((c) => c.textContent).join(" | ");
  });
  await page.click("#search-rows tbody tr");
  seen.approval_detail = JSON.parse(await until(page, () => {
    const d = document.getElementById("detail");
    return !d.hidden && document.getElementById("detail-json").textContent;
  }));
  await page.click("#detail-close");
  // Search by a request's method (any case) and path pattern: the inspected
  // request's row alone.
  await page.evaluate(() => document.getElementById("search-form").reset());
  await page.type(`#search-form input[name="method"]`, "get");
  await page.type(`#search-form input[name="path"]`, "/repos/*");
  await page.click(`#search-form button[type="submit"]`);
  seen.request_search = await until(page, () => {
    const rows = [...document.querySelectorAll("#search-rows tbody tr")];
    return rows.length > 0 && rows.map((tr) => tr.cells[4].textContent + " " + tr.cells[2].textContent).join(", ");
  });

  // Integrity: the chain holds.
  await page.click(`#tabs button[data-view="integrity"]`);
  await page.click("#verify");
  seen.integrity = await until(page, () => {
    const t = document.getElementById("int-result").textContent;
    return !t.includes("checking") && t.includes("chain") && t;
  });

  // Readable at 400 px: no view needs sideways scrolling.
  await page.setViewport({ width: 400, height: 800 });
  seen.overflow_400 = {};
  for (const view of ["waiting", "timeline", "search", "integrity", "counters"]) {
    await page.click(`#tabs button[data-view="${view}"]`);
    await new Promise((r) => setTimeout(r, 300));
    seen.overflow_400[view] = await page.evaluate(() => document.documentElement.scrollWidth);
  }
  // Search at 400 px with every row of the log (long kinds, ids, reasons), as
  // it opens: the table scrolls in its own box, the page does not.
  await page.click(`#tabs button[data-view="search"]`);
  await page.evaluate(() => document.getElementById("search-form").reset());
  await page.click(`#search-form button[type="submit"]`);
  seen.search_rows_400 = await until(page, () => {
    const n = document.querySelectorAll("#search-rows tbody tr").length;
    return n > 3 && n;
  });
  seen.overflow_400.search_all = await page.evaluate(() => document.documentElement.scrollWidth);
} catch (e) {
  seen.error = String(e && e.stack ? e.stack : e);
} finally {
  await close();
}
console.log(JSON.stringify(seen));
