// Bulk actions on jobs, as asynqmon and River UI have them: retry or cancel
// the selected jobs (POST /v1/admin/jobs/restart or /stop by jobIds), or
// every job matching a filter (the same routes by filter: a dry run shows
// the count first, then a confirmation acts). Each call's answer is shown
// per id: what was acted on, and each skipped id with its reason.

import { describe } from './api.js';
import type { Ctx } from './ctx.js';
import { h, replace } from './dom.js';

// The two actions and the statuses each applies to (the API's filter.status).
export const BULK_ACTIONS = {
  restart: { label: 'Retry', done: 'restarted', past: 'Retried', statuses: ['failed', 'cancelled', 'stale'] },
  stop: { label: 'Cancel', done: 'stopped', past: 'Cancelled', statuses: ['scheduled', 'queued', 'running'] },
} as const;
export type BulkAction = keyof typeof BULK_ACTIONS;

// The filter of a call by filter (the inspector's fields the bulk routes take).
export interface BulkFilter {
  status: string;
  tier?: string;
  errorCode?: string;
  type?: string;
  owner?: string;
}

interface BulkResult {
  restarted?: string[];
  stopped?: string[];
  skipped: { id: string; reason: string }[];
  dryRun?: boolean;
  matched?: number;
  limit?: number;
  jobIds?: string[];
}

export interface BulkOptions {
  // The ids selected in the list now.
  selected(): string[];
  // The list's filter as the bulk routes take it; null with why when the
  // list's filter cannot be acted on as a whole (why is shown).
  filter(): { filter: BulkFilter | null; why: string };
  // Called after a call changed something (reload the list).
  changed(): void;
}

export interface BulkPanel {
  el: HTMLElement;
  // Re-reads the selection (call on every checkbox change).
  sync(): void;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

export function bulkPanel(ctx: Ctx, opts: BulkOptions): BulkPanel {
  const selection = h('p', { class: 'muted', 'data-testid': 'bulk-selection' }, 'No job selected.');
  const byId: Record<BulkAction, HTMLButtonElement> = {
    restart: h('button', { type: 'button', disabled: true }, 'Retry selected'),
    stop: h('button', { type: 'button', disabled: true }, 'Cancel selected'),
  };
  const byFilter: Record<BulkAction, HTMLButtonElement> = {
    restart: h('button', { type: 'button', class: 'secondary' }, 'Retry all matching…'),
    stop: h('button', { type: 'button', class: 'secondary' }, 'Cancel all matching…'),
  };
  const filterNote = h('p', { class: 'muted small', 'data-testid': 'bulk-filter-note' });
  const confirm = h('div', { class: 'confirm', 'data-testid': 'bulk-confirm', hidden: true });
  const result = h('div', { 'data-testid': 'bulk-result', role: 'status', 'aria-live': 'polite' });
  const el = h(
    'section',
    { class: 'bulk', 'aria-label': 'Bulk actions', 'data-testid': 'bulk' },
    h('h2', null, 'Bulk actions'),
    selection,
    h('div', { class: 'actions' }, byId.restart, byId.stop, byFilter.restart, byFilter.stop),
    filterNote,
    confirm,
    result,
  );
  let busy = false;

  function sync(): void {
    const ids = opts.selected();
    selection.textContent = ids.length ? `${plural(ids.length, 'job')} selected.` : 'No job selected.';
    for (const b of Object.values(byId)) b.disabled = busy || ids.length === 0;
    const { filter, why } = opts.filter();
    for (const [a, b] of Object.entries(byFilter) as [BulkAction, HTMLButtonElement][]) {
      b.disabled = busy || !filter || !(BULK_ACTIONS[a].statuses as readonly string[]).includes(filter.status);
    }
    filterNote.textContent = filter
      ? `By filter: ${BULK_ACTIONS.restart.label} takes status ${BULK_ACTIONS.restart.statuses.join(', ')}; ${BULK_ACTIONS.stop.label} takes ${BULK_ACTIONS.stop.statuses.join(', ')}.`
      : why;
  }

  function show(action: BulkAction, r: BulkResult, how: string): void {
    const a = BULK_ACTIONS[action];
    const done = r[a.done] ?? [];
    replace(
      result,
      h('p', { 'data-testid': 'bulk-summary' }, `${how}: ${a.past.toLowerCase()} ${plural(done.length, 'job')}, skipped ${plural(r.skipped.length, 'job')}.`),
      done.length ? h('ul', { class: 'ids' }, done.map((id) => h('li', { 'data-done': id }, h('a', { href: `#/inspector/${encodeURIComponent(id)}` }, h('code', null, id)), ` ${a.done}`))) : null,
      r.skipped.length
        ? h('ul', { class: 'ids' }, r.skipped.map((s) => h('li', { 'data-skipped': s.id }, h('code', null, s.id), ' skipped: ', h('span', { class: 'reason' }, s.reason))))
        : null,
      r.matched !== undefined && r.jobIds && r.matched > r.jobIds.length
        ? h('p', { class: 'muted' }, `${plural(r.matched - r.jobIds.length, 'more job')} matched beyond this call's limit of ${r.limit}: act again to go on.`)
        : null,
    );
  }

  async function call(action: BulkAction, body: unknown): Promise<BulkResult | null> {
    try {
      return await ctx.api.post<BulkResult>(`/v1/admin/jobs/${action}`, body);
    } catch (e) {
      replace(result, h('p', { class: 'error', role: 'alert' }, `${BULK_ACTIONS[action].label} failed: ${describe(e)}`));
      return null;
    }
  }

  async function run(fn: () => Promise<void>): Promise<void> {
    busy = true;
    sync();
    try {
      await fn();
    } finally {
      busy = false;
      sync();
    }
  }

  for (const action of Object.keys(BULK_ACTIONS) as BulkAction[]) {
    const a = BULK_ACTIONS[action];
    byId[action].addEventListener('click', () =>
      void run(async () => {
        confirm.hidden = true;
        const ids = opts.selected();
        const r = await call(action, { jobIds: ids });
        if (!r) return;
        show(action, r, `${a.label} of ${plural(ids.length, 'selected job')}`);
        opts.changed();
      }),
    );
    byFilter[action].addEventListener('click', () =>
      void run(async () => {
        const { filter } = opts.filter();
        if (!filter) return;
        replace(result);
        const dry = await call(action, { filter, dryRun: true });
        if (!dry) return;
        const matched = dry.matched ?? 0;
        const take = dry.jobIds?.length ?? 0;
        const go = h('button', { type: 'button', disabled: take === 0 }, `${a.label} ${plural(take, 'job')}`);
        const back = h('button', { type: 'button', class: 'secondary' }, 'Back');
        replace(
          confirm,
          h(
            'p',
            { 'data-testid': 'bulk-dry-run', 'data-matched': matched, 'data-take': take },
            `Dry run: ${plural(matched, 'job')} ${matched === 1 ? 'matches' : 'match'} the filter (${describeFilter(filter)}); `,
            take === 0 ? 'nothing to do.' : `${a.label.toLowerCase()} acts on ${take === matched ? (take === 1 ? 'it' : `all ${take}`) : `the newest ${take} (the most one call takes)`}. Nothing has changed yet.`,
          ),
          h('div', { class: 'actions' }, go, back),
        );
        confirm.hidden = false;
        back.addEventListener('click', () => {
          confirm.hidden = true;
          replace(confirm);
        });
        go.addEventListener('click', () =>
          void run(async () => {
            go.disabled = back.disabled = true;
            const r = await call(action, { filter, limit: Math.max(1, Math.min(take, 100)) });
            confirm.hidden = true;
            replace(confirm);
            if (!r) return;
            show(action, r, `${a.label} by filter`);
            opts.changed();
          }),
        );
      }),
    );
  }
  sync();
  return { el, sync };
}

function describeFilter(f: BulkFilter): string {
  return Object.entries(f)
    .filter(([, v]) => v)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}
