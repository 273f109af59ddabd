// The approvals inbox in a real browser (headless Chromium driven by
// playwright-core), against a running `contextos serve`. Run by
// TestInboxInBrowser (serve_browser_test.go), which starts the service,
// pauses a 4200 refund and passes, in the environment:
//   BASE_URL, RUN_ID, CHROMIUM (the browser), SHOTS (a directory for
//   screenshots), and the bearer tokens LEAD_TOKEN, LEAD2_TOKEN (finance
//   leads) and AGENT_TOKEN (a support agent).
// Each browser context sends its token in Authorization on every request,
// as a single sign-on proxy in front of the service would.
// It prints one JSON line of what it saw and exits 0, or prints the error
// and exits 1.
'use strict';
const { chromium } = require('playwright-core');

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const BASE = env('BASE_URL');
const RUN = env('RUN_ID');
const SHOTS = env('SHOTS');
const CARD = /4111[ -]?1111[ -]?1111[ -]?1111/;

function check(cond, what) {
  if (!cond) throw new Error(what);
}

(async () => {
  const browser = await chromium.launch({
    executablePath: env('CHROMIUM'),
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const seen = {};
  try {
    const as = (token) => browser.newContext({ extraHTTPHeaders: { Authorization: `Bearer ${token}` }, viewport: { width: 1280, height: 900 } });
    const shot = (page, name) => page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage: true });

    // A second finance lead opens the run first: the form it holds
    // becomes stale once the first lead decides.
    const lead2 = await (await as(env('LEAD2_TOKEN'))).newPage();
    await lead2.goto(`${BASE}/inbox/runs/${RUN}`);
    await lead2.locator('[data-testid=approve]').waitFor();

    // The finance lead's inbox lists the 4200 refund, its arguments
    // redacted.
    const lead = await (await as(env('LEAD_TOKEN'))).newPage();
    const listed = await lead.goto(`${BASE}/inbox`);
    check(listed.status() === 200, `inbox answered ${listed.status()}`);
    const row = lead.locator(`[data-testid=approval][data-run="${RUN}"]`);
    await row.waitFor();
    seen.row = await row.innerText();
    check(seen.row.includes('4200'), `the inbox row lacks the amount: ${seen.row}`);
    check(seen.row.includes('[REDACTED'), `the inbox row shows no redaction: ${seen.row}`);
    check(!CARD.test(await lead.content()), 'the inbox shows the card number');
    await shot(lead, '1-lead-inbox');

    // Its page says what the decision is about.
    await row.locator('a').first().click();
    await lead.locator('[data-testid=pending]').waitFor();
    seen.args = await lead.locator('[data-testid=args]').innerText();
    check(seen.args.includes('amount_inr') && seen.args.includes('4200') && seen.args.includes('[REDACTED'), `args: ${seen.args}`);
    seen.digest = (await lead.locator('[data-testid=digest]').innerText()).trim();
    check(seen.digest.startsWith('sha256:'), `digest: ${seen.digest}`);
    seen.left = await lead.locator('[data-testid=left]').innerText();
    check(/left/.test(seen.left), `time left: ${seen.left}`);
    check(!CARD.test(await lead.content()), 'the run page shows the card number');
    await shot(lead, '2-lead-run');

    // Approve, with a reason.
    await lead.fill('#reason', 'Delivered order, within the refund window.');
    await Promise.all([lead.waitForURL(/decided=approve/), lead.click('[data-testid=approve]')]);
    seen.flash = await lead.locator('[data-testid=flash]').innerText();
    check(seen.flash.startsWith('Approved'), `flash: ${seen.flash}`);
    await shot(lead, '3-lead-approved');

    // The run ends DECIDED.
    let status = '';
    for (let i = 0; i < 100 && status !== 'DECIDED'; i++) {
      await lead.goto(`${BASE}/inbox/runs/${RUN}`);
      const s = lead.locator('[data-testid=run-status]');
      status = (await s.count()) ? (await s.innerText()).trim() : '';
      if (status !== 'DECIDED') await lead.waitForTimeout(200);
    }
    check(status === 'DECIDED', `the run's status is ${status || 'not shown'}`);
    seen.status = status;
    seen.decided = await lead.locator('[data-testid=decided]').innerText();
    await shot(lead, '4-lead-decided');

    // Its records, and a verified chain.
    await Promise.all([lead.waitForURL(/\/records$/), lead.click('[data-testid=records-link]')]);
    seen.chain = await lead.locator('[data-testid=chain]').innerText();
    check(seen.chain.startsWith('Chain verified'), `chain: ${seen.chain}`);
    seen.records = await lead.locator('[data-testid=records]').innerText();
    check(seen.records.includes('DECIDED') && seen.records.includes('DEFERRED'), `records: ${seen.records}`);
    await shot(lead, '5-lead-records');

    // The support agent's inbox is empty.
    const agent = await (await as(env('AGENT_TOKEN'))).newPage();
    await agent.goto(`${BASE}/inbox`);
    await agent.locator('[data-testid=empty]').waitFor();
    check((await agent.locator('[data-testid=approval]').count()) === 0, "the agent's inbox lists approvals");
    await shot(agent, '6-agent-inbox');

    // The second lead's stale approval is refused.
    const [resp] = await Promise.all([lead2.waitForResponse((r) => r.request().method() === 'POST'), lead2.click('[data-testid=approve]')]);
    seen.second = resp.status();
    check(seen.second === 409, `the second approval answered ${seen.second}`);
    const problem = lead2.locator('[data-testid=problem]');
    await problem.waitFor();
    seen.secondCode = await problem.getAttribute('data-code');
    check(seen.secondCode === 'already_decided', `the second approval's problem: ${seen.secondCode}`);
    await shot(lead2, '7-second-approval-refused');

    console.log(JSON.stringify({ ok: true, ...seen }));
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
