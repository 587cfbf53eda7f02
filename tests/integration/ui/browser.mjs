// Starts Debian's chromium headless for the review page's tests and
// screenshots, with everything that would reach beyond this machine turned
// off: names other than the page's own resolve to nothing.
import puppeteer from "puppeteer-core";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

export async function launch() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "tollgate-ui-chromium-"));
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    userDataDir: profile,
    args: [
      "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--no-proxy-server", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
      "--disable-features=Translate,OptimizationHints,MediaRouter",
    ],
    protocolTimeout: 60000,
  });
  return {
    browser,
    async close() {
      await browser.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

// Polls fn in the page until it returns something truthy; bounded.
export async function until(page, fn, arg, seconds = 20) {
  const handle = await page.waitForFunction(fn, { timeout: seconds * 1000, polling: 200 }, arg);
  return handle.jsonValue();
}
