/** The service's public URL, and the error docs under it. Settled once the port is bound. */
export class Links {
  constructor(public baseUrl: string) {}

  get docsBase(): string {
    return `${this.baseUrl}/docs/errors/`;
  }

  /** With no BASE_URL set, the public URL names the port actually bound. */
  bound(port: number, defaulted: boolean): void {
    if (defaulted) this.baseUrl = `http://localhost:${port}`;
  }
}
