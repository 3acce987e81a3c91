// The shapes of the API's answers (shared/API.md), as far as the dashboard reads them.

export type JobStatus = 'scheduled' | 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled' | 'stale';

export const JOB_STATUSES: JobStatus[] = ['scheduled', 'queued', 'running', 'succeeded', 'failed', 'cancelled', 'stale'];

export const TIERS = ['high', 'medium', 'low', 'system'] as const;

export interface ApiErrorBody {
  code: string;
  message: string;
  retryable?: boolean;
  field?: string;
}

export interface Output {
  deviationId: string;
  url: string;
}

/** The result of an http job: the target's response. */
export interface HTTPResult {
  status: number;
  headers: Record<string, string>;
  body: string;
  bodyEncoding?: 'base64';
  truncated?: boolean;
  durationMs: number;
}

export interface Phase {
  name: string;
  status: string;
  progress: number;
  message: string;
  startedAt: string | null;
  completedAt: string | null;
  error: ApiErrorBody | null;
}

export interface Item {
  id: string;
  uploadId: string;
  status: string;
  output: Output | null;
  error?: ApiErrorBody | null;
}

export interface Job {
  id: string;
  type: string;
  status: JobStatus;
  tier: string;
  phase: string;
  progress: number;
  phases: Phase[];
  items: Item[];
  params?: { title?: string; description?: string; tags?: string[] };
  attempts: number;
  maxAttempts: number;
  error: ApiErrorBody | null;
  /** publish: the deviation; http: the response; other kinds: their own object. */
  result: Output | HTTPResult | Record<string, unknown> | null;
  createdAt: string;
  updatedAt: string;
  scheduleAt: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  /** Why a waiting job waits and until when (absent on an API without it). */
  wait?: JobWait | null;
}

export interface JobWait {
  reason?: string;
  until?: string | null;
  detail?: string;
}

/** One run of a job (GET /v1/jobs/{id}/attempts). */
export interface Attempt {
  number: number;
  startedAt: string;
  endedAt: string | null;
  durationMs: number | null;
  outcome: 'running' | 'retrying' | 'succeeded' | 'failed' | 'cancelled' | 'interrupted';
  error: ApiErrorBody | null;
}

export interface AttemptsPage {
  jobId: string;
  attempts: Attempt[];
}

export interface JobList {
  jobs: Job[];
  nextCursor: string | null;
}

export interface TierStats {
  waiting: number;
  inFlight: number;
  delayed: number;
  dlq: number;
  paused: boolean;
}

export interface Breaker {
  key: string;
  state: string;
  failures: number;
  openUntil: string | null;
  updatedAt: string;
}

export interface Overview {
  environment: string;
  generatedAt?: string;
  tiers: Record<string, TierStats>;
  jobs: Record<string, number>;
  orphans: number;
  breakers: Breaker[];
  stats: { succeeded: number; failed: number; cancelled?: number; hours?: HourStats[] };
}

export interface HourStats {
  hour: string;
  succeeded: number;
  failed: number;
  cancelled?: number;
}

export interface Stats {
  hours: HourStats[];
  succeeded: number;
  failed: number;
  cancelled?: number;
}

export interface DlqMessage {
  messageId?: string;
  jobId: string;
  kind?: string;
  status?: string;
  attempts: number;
  error: ApiErrorBody | null;
  sentAt: string | null;
  receiveCount?: number;
}

// An event as the streams send it: `data:` of every frame but the snapshot and pings.
export interface JobEvent {
  id: string;
  type: string;
  at: string;
  jobId: string;
  seq: number;
  detail?: Record<string, string>;
  job: Job;
}

// A bulk action by filter over more jobs than the API acts on inside a
// request runs in the background (202; GET /v1/admin/operations/{id}).
export interface Operation {
  id: string;
  action: 'restart' | 'stop';
  filter: Record<string, string>;
  status: 'running' | 'succeeded' | 'failed';
  matched: number;
  done: number;
  skipped: Record<string, number>;
  progress: number;
  error: string | null;
  createdAt: string;
  updatedAt: string;
}
