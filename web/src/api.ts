// The API client: the base URL and the bearer token of the session, JSON in
// and out, the contract's errors as ApiError.

import type { ApiErrorBody } from './types.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export interface Session {
  token: string;
  // Where the API is; '' means this page's origin (the local gateway, or
  // the API in front of the bucket in AWS).
  apiBase: string;
  // Where the event streams are; '' means apiBase (in AWS: the stream
  // function's URL).
  eventsBase: string;
}

const KEY = 'conveyor.dashboard.session';

export function loadSession(): Session | null {
  try {
    const raw = sessionStorage.getItem(KEY);
    if (!raw) return null;
    const s = JSON.parse(raw) as Partial<Session>;
    if (typeof s.token !== 'string' || !s.token) return null;
    return { token: s.token, apiBase: s.apiBase ?? '', eventsBase: s.eventsBase ?? '' };
  } catch {
    return null;
  }
}

export function saveSession(s: Session): void {
  sessionStorage.setItem(KEY, JSON.stringify(s));
}

export function clearSession(): void {
  sessionStorage.removeItem(KEY);
}

export interface Claims {
  sub?: string;
  role?: string;
  plan?: string;
  exp?: number;
}

// The token's claims, read without verifying (the API verifies): for
// display and to notice an expired token before the API says so.
export function claimsOf(token: string): Claims | null {
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  try {
    const b64 = parts[1]!.replace(/-/g, '+').replace(/_/g, '/');
    const json = atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4));
    const c = JSON.parse(json) as unknown;
    return c && typeof c === 'object' ? (c as Claims) : null;
  } catch {
    return null;
  }
}

export function trimBase(u: string): string {
  return u.trim().replace(/\/+$/, '');
}

export class Api {
  // Called on a 401: the session is over.
  onUnauthorized: (() => void) | null = null;

  constructor(readonly session: Session) {}

  url(path: string): string {
    return trimBase(this.session.apiBase) + path;
  }

  eventsUrl(path: string): string {
    return trimBase(this.session.eventsBase || this.session.apiBase) + path;
  }

  headers(extra?: Record<string, string>): Record<string, string> {
    return { Authorization: `Bearer ${this.session.token}`, Accept: 'application/json', ...extra };
  }

  async request<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<{ data: T; response: Response }> {
    const init: RequestInit = { method, headers: this.headers(), cache: 'no-store' };
    if (signal) init.signal = signal;
    if (body !== undefined) {
      init.headers = this.headers({ 'Content-Type': 'application/json' });
      init.body = JSON.stringify(body);
    }
    let response: Response;
    try {
      response = await fetch(this.url(path), init);
    } catch (e) {
      if ((e as Error).name === 'AbortError') throw e;
      throw new ApiError(0, 'network', `The API did not answer (${(e as Error).message}).`);
    }
    const text = await response.text();
    let data: unknown = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = null;
      }
    }
    if (!response.ok) {
      const err = (data as { error?: ApiErrorBody } | null)?.error;
      if (response.status === 401 && this.onUnauthorized) this.onUnauthorized();
      throw new ApiError(response.status, err?.code ?? `http_${response.status}`, err?.message ?? `${method} ${path}: HTTP ${response.status}`);
    }
    return { data: data as T, response };
  }

  async get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return (await this.request<T>('GET', path, undefined, signal)).data;
  }

  async post<T>(path: string, body?: unknown): Promise<T> {
    return (await this.request<T>('POST', path, body)).data;
  }
}

// A human sentence for an error, with what to do where that is known.
export function describe(e: unknown): string {
  if (e instanceof ApiError) {
    switch (e.status) {
      case 401:
        return 'The token was refused (missing, invalid or expired). Sign in again.';
      case 403:
        return `Not allowed with this token's role: ${e.message}`;
      case 404:
        return e.code === 'not_found' || e.code === 'http_404' ? `Not found: ${e.message}` : e.message;
    }
    return e.message;
  }
  return e instanceof Error ? e.message : String(e);
}
