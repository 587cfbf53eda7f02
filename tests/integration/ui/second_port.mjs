// The browser half of test_ui_second_port.sh: logs in to the page on port
// A, has the page try a cross-origin request to another local server on
// port B with the browser's credentials, visits B in the same tab, then
// a third server on port C, then comes back to the page. Prints one JSON
// object of what it saw, the session key and CSRF token included, so that
// the test can look for them in what B and C recorded.
// usage: node second_port.mjs PAGE-URL B-URL C-URL
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { launch, until } from "./browser.mjs";

const [url, other, third] = process.argv.slice(2);
const seen = {};
const { browser, close } = await launch();
try {
  const page = await browser.newPage();
  await page.goto(url, { waitUntil: "load" });
  seen.who = await until(page, () => {
    const t = document.getElementById("who").textContent;
    return t.startsWith("session s-") && t;
  });
  const saved = JSON.parse(await page.evaluate(() => sessionStorage.getItem("tollgate-ui-session")));
  seen.key = saved.key;
  seen.csrf = saved.csrf;
  seen.cookies_of_page = await page.evaluate(() => document.cookie);
  // A request from the page to B with whatever credentials the browser holds
  // (the page's Content-Security-Policy should stop it).
  seen.from_page = await page.evaluate(async (u) => {
    try {
      const r = await fetch(u + "/from-the-page", { credentials: "include" });
      return r.status;
    } catch (e) {
      return String(e);
    }
  }, other);
  // The person follows a link to B, then to C.
  await page.goto(other + "/visited", { waitUntil: "load" });
  seen.at_other = await page.evaluate(() => document.title);
  await page.goto(third + "/visited-after", { waitUntil: "load" });
  // Back to the page (no token in the address now): the tab's session still works.
  await page.goto(new URL("/", url).href, { waitUntil: "load" });
  seen.who_after = await until(page, () => {
    const t = document.getElementById("who").textContent;
    return t.startsWith("session s-") && t;
  });
  // The CSV export still works without a cookie: fetched with the key, saved.
  const downloads = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-ui-downloads-"));
  const cdp = await page.createCDPSession();
  await cdp.send("Browser.setDownloadBehavior", { behavior: "allow", downloadPath: downloads });
  await page.click(`#tabs button[data-view="search"]`);
  await until(page, () => document.querySelector("#search-rows tbody tr") !== null);
  await page.click("#export-csv");
  for (let i = 0; i < 100 && !seen.export_csv; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const f = path.join(downloads, "tollgate-audit.csv");
    if (fs.existsSync(f)) seen.export_csv = fs.readFileSync(f, "utf8");
  }
  fs.rmSync(downloads, { recursive: true, force: true });
  // A new tab of the page without the token has no session.
  const fresh = await browser.newPage();
  await fresh.goto(new URL("/", url).href, { waitUntil: "load" });
  seen.fresh_tab = await until(fresh, () => {
    const e = document.querySelector("p.error");
    return e && e.textContent;
  });
} catch (e) {
  seen.error = String(e && e.stack ? e.stack : e);
} finally {
  await close();
}
console.log(JSON.stringify(seen));
