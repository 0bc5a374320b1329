import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { ApiFailure, del, get, setCsrfToken, whenSignedOut, type Session } from "./api";
import { AcceptInvitationPage, SignInPage } from "./pages/auth";
import { AnalyticsPage } from "./pages/analytics";
import { ApiKeysPage } from "./pages/api-keys";
import { ChannelsPage } from "./pages/channels";
import { ConversationsPage } from "./pages/conversations";
import { OptOutsPage } from "./pages/opt-outs";
import { SettingsPage } from "./pages/settings";
import { TemplateJobsPage } from "./pages/template-jobs";
import { TemplatesPage } from "./pages/templates";
import { UsersPage } from "./pages/users";
import { WebhooksPage } from "./pages/webhooks";
import { navigate, SessionContext, usePath } from "./ui";
import "./styles.css";

const PAGES: Array<{ path: string; label: string; page: () => React.JSX.Element }> = [
  { path: "/console/settings", label: "Organization", page: SettingsPage },
  { path: "/console/channels", label: "Channels", page: ChannelsPage },
  { path: "/console/api-keys", label: "API keys", page: ApiKeysPage },
  { path: "/console/webhooks", label: "Webhooks", page: WebhooksPage },
  { path: "/console/templates", label: "Templates", page: TemplatesPage },
  { path: "/console/template-jobs", label: "Template jobs", page: TemplateJobsPage },
  { path: "/console/opt-outs", label: "Opt-outs", page: OptOutsPage },
  { path: "/console/conversations", label: "Conversations", page: ConversationsPage },
  { path: "/console/analytics", label: "Analytics", page: AnalyticsPage },
  { path: "/console/users", label: "Users", page: UsersPage },
];

function App() {
  const path = usePath();
  const [session, setSession] = useState<Session | null | undefined>(undefined);

  useEffect(() => {
    whenSignedOut(() => {
      setCsrfToken(undefined);
      setSession(null);
    });
    get<Session>("/session")
      .then((s) => {
        setCsrfToken(s.csrfToken);
        setSession(s);
      })
      .catch((err) => {
        if (!(err instanceof ApiFailure) || err.status !== 401) console.error(err);
        setSession(null);
      });
  }, []);

  if (path.startsWith("/console/accept")) return <AcceptInvitationPage />;
  if (session === undefined) return <p className="loading">Loading…</p>;
  if (session === null) {
    return (
      <SignInPage
        onSignedIn={(s) => {
          setCsrfToken(s.csrfToken);
          setSession(s);
          if (!PAGES.some((p) => p.path === window.location.pathname)) navigate("/console/settings");
        }}
      />
    );
  }

  const current = PAGES.find((p) => path === p.path || path === `${p.path}/`) ?? PAGES[0];
  const Page = current.page;
  const signOut = async () => {
    try {
      await del("/session");
    } finally {
      setCsrfToken(undefined);
      setSession(null);
      navigate("/console/");
    }
  };

  return (
    <SessionContext.Provider value={session}>
      <div className="layout">
        <nav aria-label="Console">
          <div className="brand">Business Messaging</div>
          <ul>
            {PAGES.map((p) => (
              <li key={p.path}>
                <a
                  href={p.path}
                  aria-current={p === current ? "page" : undefined}
                  onClick={(e) => {
                    e.preventDefault();
                    navigate(p.path);
                  }}
                >
                  {p.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <main>
          <header className="topbar">
            <span data-testid="signed-in-as">
              {session.user.email} · <span className="role">{session.user.role}</span>
            </span>
            <button type="button" onClick={signOut}>
              Sign out
            </button>
          </header>
          <h1>{current.label}</h1>
          <Page key={current.path} />
        </main>
      </div>
    </SessionContext.Provider>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
