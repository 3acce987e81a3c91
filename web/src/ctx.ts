import type { Api } from './api.js';
import type { Live } from './live.js';

export interface Ctx {
  api: Api;
  live: Live;
  // Tells the user something in the status region (polite, or assertive for errors).
  notify(message: string, kind?: 'info' | 'error'): void;
  navigate(hash: string): void;
}

// A mounted view returns its cleanup: stop timers, close streams, unsubscribe.
export type Cleanup = () => void;
export type View = (root: HTMLElement, ctx: Ctx, params: Record<string, string>) => Cleanup;

// Runs fn now and every ms until the returned function is called; a run
// never overlaps the previous one.
export function every(ms: number, fn: () => Promise<void>): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const tick = async () => {
    if (stopped) return;
    try {
      await fn();
    } finally {
      if (!stopped) timer = setTimeout(tick, ms);
    }
  };
  void tick();
  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
  };
}

// Coalesces bursts of calls into one call after ms.
export function debounce(ms: number, fn: () => void): { (): void; cancel(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const d = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      fn();
    }, ms);
  };
  d.cancel = () => {
    if (timer !== undefined) clearTimeout(timer);
  };
  return d;
}
