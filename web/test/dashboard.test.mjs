// The dashboard in a real browser against a real local stack:
//
//   node web/test/dashboard.test.mjs          (make test runs it)
//
// It builds and starts the local stack (its own moto, API and simulator on
// free ports, in a working directory of its own so a running `make run`
// and its .local/env are left alone), mints an admin token with the CLI,
// opens /dashboard in Chromium (see findBrowser) driven by playwright-core, signs in,
// submits a job through the API (sign, PUT, confirm, connect, submit),
// finds it by id and watches it go from running to succeeded on the job
// page (the simulator holds its publish call a few seconds), pauses and resumes the low
// tier with a click (the overview says paused, then not), saves
// web/test/screenshot.png (the overview) and web/test/screenshot-job.png,
// then retries and cancels failed jobs in bulk from the inspector (by
// selection, and by filter after a dry run, the filter's two jobs past
// the stack's sync max, so as an operation whose progress the page follows;
// screenshot-bulk.png), and
// stops the stack — its whole process group — even on failure.
//
// Every wait is on a condition with a deadline; nothing sleeps blindly.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, createWriteStream, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '..', '..');
const run = promisify(execFile);

// The browser, found the way Playwright users expect: CHROMIUM_PATH, then a
// system Chromium or Chrome on PATH, then Playwright's own Chromium
// (`npx playwright-core install chromium`, which downloads it into
// ~/.cache/ms-playwright when the network allows), and apt-get only as root
// (Debian/Ubuntu). The README says what each path needs.
async function findBrowser() {
  if (process.env.CHROMIUM_PATH) {
    assert.ok(existsSync(process.env.CHROMIUM_PATH), `CHROMIUM_PATH=${process.env.CHROMIUM_PATH} does not exist`);
    return process.env.CHROMIUM_PATH;
  }
  for (const name of ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable', 'chrome']) {
    for (const dir of (process.env.PATH ?? '').split(':').filter(Boolean)) {
      if (existsSync(join(dir, name))) return join(dir, name);
    }
  }
  const own = () => {
    try {
      const p = chromium.executablePath();
      return p && existsSync(p) ? p : '';
    } catch {
      return '';
    }
  };
  if (own()) return own();
  log('no Chromium found: trying `npx playwright-core install chromium`');
  try {
    await run('npx', ['--no-install', 'playwright-core', 'install', 'chromium'], { cwd: join(repo, 'web'), timeout: 300_000 });
    if (own()) return own();
  } catch (e) {
    log(`playwright could not install chromium: ${e.message.split('\n')[0]}`);
  }
  if (process.getuid?.() === 0) {
    log('installing chromium with apt-get (root)');
    await run('sh', ['-c', 'apt-get update -qq && apt-get install -y -qq chromium'], { timeout: 600_000 });
    if (existsSync('/usr/bin/chromium')) return '/usr/bin/chromium';
  }
  assert.fail('no browser: set CHROMIUM_PATH, install Chromium or Chrome, or run `npx playwright-core install chromium` in web/ (see README, "The dashboard")');
}
let CHROMIUM = '';
const t0 = Date.now();
const log = (msg) => console.log(`# [${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);

// How long the simulator holds the job's publish call: the job page must
// show the job running before it succeeds.
const PUBLISH_LATENCY_MS = 5000;

// A real 1×1 PNG: the confirm step sniffs the content.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=', 'base64');

// Everything to undo, undone in reverse order by cleanup().
const undo = [];
let cleaned = false;
async function cleanup() {
  if (cleaned) return;
  cleaned = true;
  while (undo.length) {
    const fn = undo.pop();
    try {
      await fn();
    } catch (e) {
      console.error(`# cleanup: ${e.message}`);
    }
  }
}
after(cleanup);
// The stack must not outlive us however we end (playwright, too, exits on
// SIGINT), nor its working directory.
let stackPgid = 0;
let workdir = '';
process.on('exit', () => {
  if (stackPgid) {
    try {
      process.kill(-stackPgid, 'SIGKILL');
    } catch {}
  }
  if (workdir) rmSync(workdir, { recursive: true, force: true });
});
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    void cleanup().finally(() => process.exit(130));
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// Polls fn until it returns a truthy value, or fails after ms with what.
async function until(what, ms, fn, every = 200) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

async function go(args, opts = {}) {
  try {
    return await run('go', args, { cwd: repo, maxBuffer: 16 << 20, ...opts });
  } catch (e) {
    throw new Error(`go ${args.join(' ')} failed: ${e.stderr || e.message}`);
  }
}

// Starts the stack; resolves with its printed environment once it runs.
async function startStack(bin, workdir) {
  const [apiPort, simPort] = [await freePort(), await freePort()];
  // A bulk action by filter over more than one job runs as an operation,
  // so that the inspector's bulk actions by filter show one's progress.
  const env = { ...process.env, CONVEYOR_API_ADDR: `127.0.0.1:${apiPort}`, CONVEYOR_SIMULATOR_ADDR: `127.0.0.1:${simPort}`, CONVEYOR_BULK_SYNC_MAX: '1' };
  // Our own emulators, never shared ones: the stack names its resources
  // conveyor-local, as `make run` does.
  delete env.AWS_ENDPOINT_URL;
  delete env.AWS_ENDPOINT_URL_DYNAMODB;
  const logPath = join(workdir, 'stack.log');
  const logFile = createWriteStream(logPath);
  const child = spawn(bin, [], { cwd: workdir, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  stackPgid = child.pid;
  let exited = null;
  const exitedP = new Promise((resolve) => child.on('exit', (code, signal) => resolve((exited = { code, signal }))));
  undo.push(async () => {
    if (exited) return;
    log('stopping the stack');
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {}
    const t = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
    }, 10_000);
    await exitedP;
    clearTimeout(t);
    // Whatever is left in the group (the emulator) goes too.
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {}
    stackPgid = 0;
  });
  child.stderr.pipe(logFile);
  let out = '';
  child.stdout.on('data', (b) => {
    out += b.toString();
    logFile.write(b);
  });
  const printed = await until('the stack to print its environment', 90_000, () => {
    if (exited) throw new Error(`the stack exited (${JSON.stringify(exited)}); its log:\n${readFileSync(logPath, 'utf8').slice(-4000)}`);
    return out.includes('Ctrl-C stops everything') && out;
  }, 100).catch((e) => {
    throw new Error(`${e.message}\n--- stack log (${logPath}) ---\n${existsSync(logPath) ? readFileSync(logPath, 'utf8').slice(-4000) : ''}`);
  });
  const vars = {};
  for (const line of printed.split('\n')) {
    const m = /^ {2}([A-Z0-9_]+)=(.*)$/.exec(line);
    if (m) vars[m[1]] = m[2];
  }
  assert.ok(vars.CONVEYOR_API_URL && vars.CONVEYOR_JWT_SECRET, `the stack printed no API URL or JWT secret:\n${printed}`);
  return { vars, logPath };
}

function client(base, token) {
  return async function api(method, path, body, expect = [200, 201, 202, 204]) {
    const res = await fetch(base + path, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (!expect.includes(res.status)) throw new Error(`${method} ${path}: HTTP ${res.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

// README's "Try it", through the API: connect, sign, PUT, confirm, submit.
async function submitJob(api, title) {
  await api('PUT', '/v1/account/connection', { provider: 'deviantart', refreshToken: `dash-e2e-${Date.now()}` });
  const signed = await api('POST', '/v1/uploads/sign', { filename: 'cat.png', contentType: 'image/png', size: PNG.length });
  const headers = { ...(signed.headers || {}) };
  for (const k of Object.keys(headers)) if (k.toLowerCase() === 'content-length' || k.toLowerCase() === 'host') delete headers[k];
  const put = await fetch(signed.url, { method: signed.method || 'PUT', headers: { 'Content-Type': 'image/png', ...headers }, body: PNG });
  assert.ok(put.ok, `PUT to the presigned URL: HTTP ${put.status} ${await put.text()}`);
  const up = await api('POST', `/v1/uploads/${signed.uploadId}/confirm`);
  assert.equal(up.status, 'confirmed', `the upload: ${JSON.stringify(up)}`);
  const job = await api('POST', '/v1/jobs', { type: 'publish', items: [{ uploadId: signed.uploadId }], params: { title } });
  assert.match(job.id, /^job_/);
  return job;
}

// A working directory of our own inside the repository (the stack finds
// go.mod and .venv above it; its .local/env lands here), and the binaries.
let bin = '';

// Compiling is preparation, outside the test's two minutes: from a cold Go
// build cache it takes about a minute and a half on two cores, from a warm
// one a second or two.
before(async () => {
  assert.ok(existsSync(join(repo, 'web', 'dist', 'index.html')), 'web/dist is not built: run `make web`');
  CHROMIUM = await findBrowser();
  log(`browser: ${CHROMIUM}`);
  workdir = mkdtempSync(join(here, '.stack-'));
  undo.push(() => rmSync(workdir, { recursive: true, force: true }));
  bin = join(workdir, 'bin');
  log('building the local stack and the CLI');
  await Promise.all([
    go(['build', '-o', join(bin, 'conveyor-local'), './localstack/cmd/conveyor-local']),
    go(['build', '-o', join(bin, 'conveyor'), './cmd/conveyor']),
  ]);
  log('built');
}, { timeout: 600_000 });

test('the dashboard shows the stack live: a job to succeeded, pause and resume a tier, bulk retry and cancel', { timeout: 180_000 }, async () => {
  const started = Date.now();
  log('starting the local stack');
  const { vars, logPath } = await startStack(join(bin, 'conveyor-local'), workdir);
  const base = vars.CONVEYOR_API_URL;
  log(`stack up at ${base} (log: ${logPath})`);
  try {
    const { stdout } = await run(join(bin, 'conveyor'), ['token', '--sub', 'local-admin', '--role', 'admin', '--plan', 'free', '--ttl', '1h'], {
      cwd: workdir,
      env: { ...process.env, CONVEYOR_JWT_SECRET: vars.CONVEYOR_JWT_SECRET },
    });
    const token = stdout.trim();
    assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/, 'the CLI minted no JWT');
    const api = client(base, token);

    // The dashboard must be mounted by the stack.
    const probe = await fetch(`${base}/dashboard/`);
    assert.equal(probe.status, 200, `GET /dashboard/ on the local stack: HTTP ${probe.status} — is httpapi.RegisterDashboard on the api function's router?`);
    const csp = probe.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'self'/, `the dashboard's CSP: ${csp}`);
    assert.match(csp, /frame-ancestors 'none'/, `the dashboard's CSP: ${csp}`);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, `the dashboard's CSP: ${csp}`);
    assert.equal(probe.headers.get('x-content-type-options'), 'nosniff');
    const ov0 = await api('GET', '/v1/admin/overview', undefined, [200]).catch((e) => {
      throw new Error(`the admin overview is not served: ${e.message}`);
    });
    assert.ok(ov0.tiers?.low, `the overview has no low tier: ${JSON.stringify(ov0)}`);

    log('launching chromium');
    const profile = mkdtempSync(join(tmpdir(), 'conveyor-dashboard-chromium-'));
    undo.push(() => rmSync(profile, { recursive: true, force: true }));
    const browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1280, height: 900 },
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    undo.push(() => browser.close());
    const page = browser.pages()[0] ?? (await browser.newPage());
    page.setDefaultTimeout(15_000);
    const problems = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()} (${m.location().url})`));

    // No token to paste: on the local stack the dashboard signs itself in
    // (GET /dashboard/sign-in.json) as local-admin, with the stream's URL.
    const session = await fetch(`${base}/dashboard/sign-in.json`);
    assert.equal(session.status, 200, `the local session: HTTP ${session.status}`);
    const sess = await session.json();
    assert.equal(sess.eventsBase, vars.CONVEYOR_STREAM_URL === base ? '' : vars.CONVEYOR_STREAM_URL, 'the session names the stream URL');
    await page.goto(`${base}/dashboard`);
    const low = page.locator('tr[data-tier="low"]');
    await low.waitFor();
    await page.locator('[data-testid="live-state"][data-state="open"]').waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.length), 1, 'the session is kept in sessionStorage');
    assert.equal(await page.evaluate(() => document.body.dataset.signedIn), 'local', 'the dashboard signed itself in');
    assert.equal(await page.getByLabel('Access token').count(), 0, 'no sign-in form');
    await page.locator('.who').getByText('local-admin (admin)').waitFor();
    log('signed itself in; the overview is live');

    // A job through the API; the page hears of it through /v1/events. The
    // simulator holds its publish call for a few seconds, so the job page
    // shows it running first and then follows it live to succeeded.
    const fault = await fetch(`${vars.CONVEYOR_SIMULATOR_URL}/_sim/faults`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ path: '/api/v1/oauth2/stash/publish', latencyMs: PUBLISH_LATENCY_MS, count: 1 }),
    });
    assert.equal(fault.status, 201, `the simulator's fault: HTTP ${fault.status} ${await fault.text()}`);
    // The first upload call fails with a 503: the first attempt retries,
    // the second succeeds; the job page lists both.
    const flaky = await fetch(`${vars.CONVEYOR_SIMULATOR_URL}/_sim/faults`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ path: '/api/v1/oauth2/stash/submit', status: 503, count: 1 }),
    });
    assert.equal(flaky.status, 201, `the simulator's fault: HTTP ${flaky.status} ${await flaky.text()}`);
    const job = await submitJob(api, 'Dashboard end-to-end');
    log(`submitted ${job.id} (tier ${job.tier})`);
    await page.locator(`[data-testid="recent-events"] a`, { hasText: job.id }).first().waitFor({ timeout: 30_000 });

    // Find it by id, watch it reach succeeded.
    await page.getByRole('link', { name: 'Jobs', exact: true }).click();
    await page.getByLabel('Job id').fill(job.id);
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    await page.waitForURL(`**/dashboard/#/jobs/${job.id}`);
    await page.locator('main[data-status="running"] li[data-phase="publish"]:not([data-status="completed"])').waitFor({ timeout: 30_000 });
    await page.getByTestId('job-stream').getByText('(live)').waitFor();
    log('the job page says running, publish not done');
    await page.locator('main[data-status="succeeded"]').waitFor({ timeout: 60_000 });
    await page.getByTestId('job-state').getByText('succeeded', { exact: true }).waitFor();
    log('the job page says succeeded');
    // The job's stream ends after its finishing event, and the page does
    // not open it again: no request to it for two seconds.
    await page.getByTestId('job-stream').getByText('(ended: the job is finished)').waitFor({ timeout: 10_000 });
    let reopened = 0;
    const countStream = (r) => r.url().includes(`/v1/jobs/${job.id}/events`) && reopened++;
    page.on('request', countStream);
    await new Promise((r) => setTimeout(r, 2_000));
    page.off('request', countStream);
    assert.equal(reopened, 0, 'the finished job\'s stream was opened again');
    log('the finished job\'s stream stays closed');
    const phases = await page.locator('[data-testid="timeline"] li.phase').evaluateAll((els) => els.map((e) => `${e.dataset.phase}:${e.dataset.status}`));
    assert.deepEqual(phases, ['token:completed', 'download:completed', 'upload:completed', 'publish:completed']);
    assert.equal(await page.locator('tr[data-item][data-status="published"]').count(), 1, 'the item is published');
    await page.getByTestId('deviation').waitFor();
    await page.locator('[data-testid="job-events"] li[data-type="job.succeeded"]').waitFor();
    // Every attempt with its start, duration and error.
    await page.locator('[data-testid="attempts"] tr[data-outcome="succeeded"]').waitFor();
    const attempts = await page.locator('[data-testid="attempts"] tr').evaluateAll((els) =>
      els.map((e) => ({ outcome: e.dataset.outcome, cells: [...e.children].map((c) => c.textContent.trim()) })),
    );
    assert.equal(attempts.length, 2, `two attempts: ${JSON.stringify(attempts)}`);
    assert.equal(attempts[0].outcome, 'retrying', `the first attempt: ${JSON.stringify(attempts[0])}`);
    assert.match(attempts[0].cells[4], /503/, `the first attempt's error: ${JSON.stringify(attempts[0])}`);
    assert.match(attempts[0].cells[2], /^\d+\.\d s$/, `the first attempt's duration: ${JSON.stringify(attempts[0])}`);
    assert.equal(attempts[1].outcome, 'succeeded');
    assert.match(attempts[1].cells[2], /^\d+\.\d s$/);
    assert.equal(attempts[1].cells[4], '');
    log('the job page lists both attempts');
    await page.screenshot({ path: join(here, 'screenshot-job.png'), fullPage: true });

    // Pause and resume the low tier with a click; the overview follows.
    await page.getByRole('link', { name: 'Overview', exact: true }).click();
    await page.locator('main[data-loaded="true"]').waitFor();
    await page.getByRole('button', { name: 'Pause the low tier' }).click();
    await page.locator('tr[data-tier="low"][data-paused="true"]').waitFor();
    await low.getByText('paused', { exact: true }).waitFor();
    assert.equal((await api('GET', '/v1/admin/overview')).tiers.low.paused, true, 'the API overview says low is paused');
    log('low paused');
    await page.getByRole('button', { name: 'Resume the low tier' }).click();
    await page.locator('tr[data-tier="low"][data-paused="false"]').waitFor();
    await low.getByText('active', { exact: true }).waitFor();
    assert.equal((await api('GET', '/v1/admin/overview')).tiers.low.paused, false, 'the API overview says low is resumed');
    // Two polls later the page still says so (no stale poll flips it back).
    const seen = await page.getByTestId('overview-updated').textContent();
    await until('two more overview polls', 10_000, async () => (await page.getByTestId('overview-updated').textContent()) !== seen);
    assert.equal(await low.getAttribute('data-paused'), 'false');
    log('low resumed');

    // The other pages answer: the job in the list, an empty DLQ, breakers.
    await page.getByRole('link', { name: 'Jobs', exact: true }).click();
    await page.locator(`tr[data-job="${job.id}"][data-status="succeeded"]`).waitFor();
    await page.getByRole('link', { name: 'DLQ', exact: true }).click();
    await page.getByTestId('dlq-count').getByText('The high DLQ is empty.').waitFor();
    await page.getByRole('link', { name: 'low', exact: true }).click();
    await page.getByTestId('dlq-count').getByText('The low DLQ is empty.').waitFor();
    await page.getByRole('link', { name: 'Breakers', exact: true }).click();
    await page.getByTestId('breakers-count').getByText(/breaker/).waitFor();

    // The inspector: search every user's jobs by owner and status, open the
    // job with its owner and events; the orphans view answers.
    await page.getByRole('link', { name: 'Search', exact: true }).click();
    await page.getByTestId('inspector-count').getByText(/match/).waitFor();
    await page.getByLabel('owner').fill('local-admin');
    await page.getByLabel('status').selectOption('succeeded');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.waitForURL('**/dashboard/#/inspector?status=succeeded&owner=local-admin');
    await page.getByTestId('inspector-count').getByText('1 job match (every user).').waitFor();
    await page.locator(`tr[data-job="${job.id}"][data-owner="local-admin"][data-status="succeeded"]`).waitFor();
    await page.getByRole('link', { name: job.id }).click();
    await page.getByTestId('owner').getByText('local-admin', { exact: true }).waitFor();
    await page.getByTestId('job-events').getByText('job.succeeded').waitFor();
    await page.getByLabel('owner').waitFor({ state: 'detached' });
    await page.goto(`${base}/dashboard/#/inspector?owner=nobody-at-all`);
    await page.getByTestId('inspector-count').getByText('0 jobs match (every user).').waitFor();
    await page.getByRole('link', { name: 'Orphans', exact: true }).click();
    await page.getByTestId('orphans-count').getByText('No orphans.').waitFor();
    log('inspector search, the inspected job and the orphans view answer');
    await page.getByRole('link', { name: 'Overview', exact: true }).click();
    await page.locator('main[data-loaded="true"]').waitFor();

    // The chart counts the success.
    await page.getByTestId('totals').getByText('1 succeeded').waitFor();
    assert.equal(await page.locator('svg.chart g.hour[data-succeeded="1"]').count(), 1, 'one hour bar with one success');
    await page.screenshot({ path: join(here, 'screenshot.png'), fullPage: true });
    log(`screenshots: ${join(here, 'screenshot.png')}, ${join(here, 'screenshot-job.png')}`);

    // Bulk actions in the inspector. Three jobs fail at once (the
    // simulator refuses their upload with a permanent 400); the low tier
    // is paused so that what is retried stays queued and can be cancelled.
    const refuse = await fetch(`${vars.CONVEYOR_SIMULATOR_URL}/_sim/faults`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ path: '/api/v1/oauth2/stash/submit', status: 400, count: 3 }),
    });
    assert.equal(refuse.status, 201, `the simulator's fault: HTTP ${refuse.status} ${await refuse.text()}`);
    const failed = [];
    for (const n of [1, 2, 3]) failed.push((await submitJob(api, `Bulk ${n}`)).id);
    const statusOf = async (id) => (await api('GET', `/v1/jobs/${id}`)).status;
    for (const id of failed) await until(`${id} to fail`, 60_000, async () => (await statusOf(id)) === 'failed');
    await api('POST', '/v1/admin/tiers/low/pause');
    log(`three jobs failed: ${failed.join(', ')}; low paused`);
    const [b1, b2, b3] = failed;

    // By id: the failed job is retried, the succeeded one skipped with its reason.
    await page.goto(`${base}/dashboard/#/inspector?owner=local-admin`);
    await page.getByTestId('inspector-count').getByText('4 jobs match (every user).').waitFor();
    const bulk = page.getByTestId('bulk');
    assert.equal(await bulk.getByRole('button', { name: 'Retry all matching…' }).isDisabled(), true, 'by filter needs a status');
    await page.getByLabel(`Select ${b1}`).check();
    await page.getByLabel(`Select ${job.id}`).check();
    await bulk.getByTestId('bulk-selection').getByText('2 jobs selected.').waitFor();
    await bulk.getByRole('button', { name: 'Retry selected' }).click();
    await bulk.locator(`li[data-done="${b1}"]`).waitFor();
    const skipped = await bulk.locator(`li[data-skipped="${job.id}"] .reason`).textContent();
    assert.match(skipped, /succeeded/, `the succeeded job's skip reason: ${skipped}`);
    await bulk.getByTestId('bulk-summary').getByText('retried 1 job, skipped 1 job').waitFor();
    assert.equal(await statusOf(b1), 'queued', `${b1} is queued again`);
    assert.equal(await statusOf(job.id), 'succeeded');
    await page.locator(`tr[data-job="${b1}"][data-status="queued"]`).waitFor();
    log('retry by id: one retried, one skipped with its reason');

    // By filter: a dry run counts the two still failed and changes nothing;
    // the confirmation retries both.
    await page.getByLabel('status').selectOption('failed');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.waitForURL('**/dashboard/#/inspector?status=failed&owner=local-admin');
    await page.getByTestId('inspector-count').getByText('2 jobs match (every user).').waitFor();
    await bulk.getByRole('button', { name: 'Retry all matching…' }).click();
    const dry = bulk.getByTestId('bulk-dry-run');
    await dry.waitFor();
    assert.equal(await dry.getAttribute('data-matched'), '2', await dry.textContent());
    assert.match(await dry.textContent(), /2 jobs match the filter \(status failed, owner local-admin\)/);
    assert.deepEqual([await statusOf(b2), await statusOf(b3)], ['failed', 'failed'], 'the dry run changed nothing');
    // Two are past the stack's sync max (CONVEYOR_BULK_SYNC_MAX=1): the
    // API answers 202 with an operation, whose progress the panel follows.
    await bulk.getByRole('button', { name: 'Retry 2 jobs' }).click();
    const op = bulk.getByTestId('bulk-operation');
    await op.waitFor();
    const opId = await op.getAttribute('data-operation');
    assert.match(opId ?? '', /^op_/, 'the panel names the operation');
    await bulk.getByTestId('bulk-summary').getByText('Retry by filter: retried 2 jobs, skipped 0 jobs.').waitFor();
    assert.equal(await op.getAttribute('data-status'), 'succeeded');
    assert.equal(await op.getAttribute('data-progress'), '100');
    assert.deepEqual([await statusOf(b2), await statusOf(b3)], ['queued', 'queued'], 'both retried');
    const finished = await api('GET', `/v1/admin/operations/${opId}`);
    assert.deepEqual([finished.status, finished.matched, finished.done], ['succeeded', 2, 2], JSON.stringify(finished));
    await page.getByTestId('inspector-count').getByText('0 jobs match (every user).').waitFor();
    log(`retry by filter: dry run 2, then operation ${opId} retried 2`);

    // Cancel: by id one queued job (and a succeeded one skipped), then by
    // filter the rest of the queued ones.
    await page.goto(`${base}/dashboard/#/inspector?status=queued&owner=local-admin`);
    await page.getByTestId('inspector-count').getByText('3 jobs match (every user).').waitFor();
    await page.getByLabel(`Select ${b1}`).check();
    await bulk.getByRole('button', { name: 'Cancel selected' }).click();
    await bulk.getByTestId('bulk-summary').getByText('cancelled 1 job, skipped 0 jobs').waitFor();
    assert.equal(await statusOf(b1), 'cancelled');
    await page.getByTestId('inspector-count').getByText('2 jobs match (every user).').waitFor();
    await bulk.getByRole('button', { name: 'Cancel all matching…' }).click();
    assert.equal(await bulk.getByTestId('bulk-dry-run').getAttribute('data-matched'), '2');
    await bulk.getByRole('button', { name: 'Cancel 2 jobs' }).click();
    await bulk.getByTestId('bulk-summary').getByText('Cancel by filter: cancelled 2 jobs, skipped 0 jobs.').waitFor();
    assert.deepEqual([await statusOf(b2), await statusOf(b3)], ['cancelled', 'cancelled']);
    await page.screenshot({ path: join(here, 'screenshot-bulk.png'), fullPage: true });
    log('cancel by id and by filter; screenshot-bulk.png');
    assert.deepEqual(problems, [], 'the page logged errors');
    log(`the test took ${((Date.now() - started) / 1000).toFixed(1)} s (limit 180 s)`);
  } catch (e) {
    if (existsSync(logPath)) console.error(`--- the stack's log, last lines ---\n${readFileSync(logPath, 'utf8').split('\n').slice(-30).join('\n')}`);
    throw e;
  } finally {
    await cleanup();
    log('done');
  }
});
