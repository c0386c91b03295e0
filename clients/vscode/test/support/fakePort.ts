// A fake `LspPort`: records the requests and answers each with the next of `answers`.
import type { LspPort } from '../../src/features';

export class Port implements LspPort {
  requests: { method: string; params: unknown }[] = [];
  answers: unknown[] = [];
  sendRequest(method: string, params: unknown): Promise<unknown> {
    this.requests.push({ method, params });
    return Promise.resolve(this.answers.shift());
  }
  onNotification() {
    return { dispose: () => undefined };
  }
}
