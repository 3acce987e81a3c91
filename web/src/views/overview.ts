// The overview: tiers (waiting / in flight / delayed / DLQ / paused) with
// pause and resume, jobs per status, finished jobs per hour, recent events.
// The overview is polled every 2 s and refreshed at once on every event.

import { describe } from '../api.js';
import { chart } from '../chart.js';
import { debounce, every, type View } from '../ctx.js';
import { badge, h, replace, timeEl } from '../dom.js';
import { JOB_STATUSES, TIERS, type JobEvent, type Overview, type Stats, type TierStats } from '../types.js';

export const POLL_MS = 2000;
const STATS_MS = 30_000;

interface TierRow {
  row: HTMLTableRowElement;
  cells: Record<'waiting' | 'inFlight' | 'delayed' | 'dlq', HTMLTableCellElement>;
  state: HTMLTableCellElement;
  button: HTMLButtonElement;
  busy: boolean;
}

export const overviewView: View = (root, ctx) => {
  const updated = h('p', { class: 'muted', 'data-testid': 'overview-updated' }, 'Loading…');
  const tbody = h('tbody');
  const tiersTable = h(
    'table',
    { class: 'data', 'aria-describedby': 'tiers-caption' },
    h('caption', { id: 'tiers-caption' }, 'Queue depth per tier (approximate, as SQS counts)'),
    h(
      'thead',
      null,
      h('tr', null, ['Tier', 'Waiting', 'In flight', 'Delayed', 'DLQ', 'State', ''].map((t, i) => h('th', { scope: 'col', class: i > 0 && i < 5 ? 'num' : undefined }, t || h('span', { class: 'visually-hidden' }, 'Action')))),
    ),
    tbody,
  );
  const rows = new Map<string, TierRow>();
  const jobsList = h('dl', { class: 'counts', 'data-testid': 'job-counts' });
  const totals = h('p', { class: 'muted', 'data-testid': 'totals' });
  const chartBox = h('div', { class: 'chart-box', 'data-testid': 'chart' }, h('p', { class: 'muted' }, 'Loading…'));
  const eventsList = h('ol', { class: 'events', 'data-testid': 'recent-events', 'aria-live': 'off' });
  const breakersNote = h('p', { 'data-testid': 'breakers-note' });

  replace(
    root,
    h('h1', null, 'Overview'),
    updated,
    h('section', { 'aria-labelledby': 'tiers-h' }, h('h2', { id: 'tiers-h' }, 'Tiers'), tiersTable),
    h(
      'div',
      { class: 'columns' },
      h('section', { 'aria-labelledby': 'jobs-h' }, h('h2', { id: 'jobs-h' }, 'Jobs by status'), jobsList, breakersNote),
      h('section', { 'aria-labelledby': 'chart-h' }, h('h2', { id: 'chart-h' }, 'Finished per hour'), chartBox, totals),
    ),
    h('section', { 'aria-labelledby': 'events-h' }, h('h2', { id: 'events-h' }, 'Recent events'), eventsList),
  );

  // A pause or resume bumps gen: an overview requested before it finished
  // is stale for the paused flags and is not shown.
  let gen = 0;

  function tierRow(name: string): TierRow {
    let r = rows.get(name);
    if (r) return r;
    const num = () => h('td', { class: 'num' }, '—');
    const cells = { waiting: num(), inFlight: num(), delayed: num(), dlq: num() };
    const state = h('td', { 'data-col': 'state' });
    const button = h('button', { type: 'button', class: 'toggle', 'data-tier': name }, 'Pause');
    const row = h('tr', { 'data-tier': name }, h('th', { scope: 'row' }, name), cells.waiting, cells.inFlight, cells.delayed, cells.dlq, state, h('td', null, button));
    for (const [k, td] of Object.entries(cells)) td.setAttribute('data-col', k);
    r = { row, cells, state, button, busy: false };
    const tr = r;
    button.addEventListener('click', () => void toggle(name, tr));
    rows.set(name, r);
    tbody.append(row);
    return r;
  }

  function showTier(r: TierRow, name: string, t: TierStats): void {
    r.cells.waiting.textContent = String(t.waiting);
    r.cells.inFlight.textContent = String(t.inFlight);
    r.cells.delayed.textContent = String(t.delayed);
    r.cells.dlq.replaceChildren(t.dlq > 0 ? h('a', { href: `#/dlq/${name}` }, String(t.dlq)) : '0');
    showPaused(r, name, t.paused);
  }

  function showPaused(r: TierRow, name: string, paused: boolean): void {
    r.row.dataset['paused'] = String(paused);
    r.state.replaceChildren(badge(paused ? 'paused' : 'active'));
    r.button.textContent = paused ? 'Resume' : 'Pause';
    r.button.setAttribute('aria-label', `${paused ? 'Resume' : 'Pause'} the ${name} tier`);
    r.button.setAttribute('aria-pressed', String(paused));
  }

  async function toggle(name: string, r: TierRow): Promise<void> {
    if (r.busy) return;
    const pause = r.row.dataset['paused'] !== 'true';
    r.busy = true;
    r.button.disabled = true;
    gen++;
    try {
      const res = await ctx.api.post<{ tier: string; paused: boolean }>(`/v1/admin/tiers/${encodeURIComponent(name)}/${pause ? 'pause' : 'resume'}`);
      showPaused(r, name, res.paused);
      ctx.notify(`The ${name} tier is ${res.paused ? 'paused: its queue is not consumed' : 'resumed'}.`);
    } catch (e) {
      ctx.notify(`Could not ${pause ? 'pause' : 'resume'} the ${name} tier: ${describe(e)}`, 'error');
    } finally {
      gen++;
      r.busy = false;
      r.button.disabled = false;
      refreshSoon();
    }
  }

  function showOverview(ov: Overview): void {
    const names = [...TIERS.filter((t) => t in ov.tiers), ...Object.keys(ov.tiers).filter((t) => !(TIERS as readonly string[]).includes(t))];
    for (const name of names) showTier(tierRow(name), name, ov.tiers[name]!);
    if (names.length === 0 && !tbody.querySelector('.empty')) {
      tbody.append(h('tr', { class: 'empty' }, h('td', { colspan: 7 }, 'No tiers configured.')));
    }
    replace(
      jobsList,
      JOB_STATUSES.filter((s) => s !== 'stale').map((s) => [
        h('dt', null, h('a', { href: `#/jobs?status=${s}` }, s)),
        h('dd', { 'data-status': s }, String(ov.jobs?.[s] ?? 0)),
      ]),
      h('dt', null, 'orphans'),
      h('dd', { 'data-status': 'orphans', title: 'queued or running jobs that recovery would take back' }, String(ov.orphans ?? 0)),
    );
    const open = (ov.breakers ?? []).filter((b) => b.state !== 'closed');
    replace(
      breakersNote,
      open.length === 0 ? 'No circuit breaker is open. ' : `${open.length} circuit breaker${open.length === 1 ? '' : 's'} not closed. `,
      h('a', { href: '#/breakers' }, 'Breakers'),
    );
    replace(updated, `Environment ${ov.environment}; updated `, timeEl(ov.generatedAt ?? new Date().toISOString()), '.');
  }

  async function refresh(): Promise<void> {
    const started = gen;
    try {
      const ov = await ctx.api.get<Overview>('/v1/admin/overview');
      if (started !== gen) return;
      showOverview(ov);
      root.dataset['loaded'] = 'true';
    } catch (e) {
      replace(updated, h('span', { class: 'error' }, `The overview could not be read: ${describe(e)}`));
    }
  }

  async function refreshStats(): Promise<void> {
    try {
      const st = await ctx.api.get<Stats>('/v1/admin/stats?hours=24');
      replace(chartBox, chart(st, 24));
      replace(totals, h('span', { class: 'ok-text' }, `${st.succeeded} succeeded`), ', ', h('span', { class: 'bad-text' }, `${st.failed} failed`), ' in the last 24 hours.');
    } catch (e) {
      replace(chartBox, h('p', { class: 'error' }, `Statistics unavailable: ${describe(e)}`));
    }
  }

  function eventItem(ev: JobEvent): HTMLElement {
    return h(
      'li',
      { 'data-type': ev.type },
      timeEl(ev.at),
      ' ',
      h('code', null, ev.type),
      ' ',
      h('a', { href: `#/jobs/${encodeURIComponent(ev.jobId)}` }, ev.jobId),
      ev.job ? [' ', badge(ev.job.status)] : null,
    );
  }

  function showEvents(): void {
    const list = ctx.live.recent.slice(0, 15);
    if (list.length === 0) replace(eventsList, h('li', { class: 'muted' }, 'No events since the page opened.'));
    else replace(eventsList, list.map(eventItem));
  }

  const refreshSoon = debounce(150, () => void refresh());
  const statsSoon = debounce(500, () => void refreshStats());
  const stopPoll = every(POLL_MS, refresh);
  const stopStats = every(STATS_MS, refreshStats);
  showEvents();
  const unsubscribe = ctx.live.subscribe((ev) => {
    showEvents();
    refreshSoon();
    if (ev.job && ['succeeded', 'failed', 'cancelled'].includes(ev.job.status)) statsSoon();
  });

  return () => {
    stopPoll();
    stopStats();
    refreshSoon.cancel();
    statsSoon.cancel();
    unsubscribe();
  };
};

