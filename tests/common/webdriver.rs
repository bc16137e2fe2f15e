//! A headless Chromium driven through chromedriver's W3C WebDriver HTTP API (a few JSON
//! requests; Debian's `chromium` and `chromium-driver`, installed on first use when missing,
//! as the other test peers are).

use std::{
    net::TcpListener,
    os::unix::process::CommandExt,
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::{json, Value};

/// For a page that does not say how often it refreshes: only a bound on how long a broken page
/// may hang a test; never a timing assertion.
const DEADLINE: Duration = Duration::from_secs(30);

/// For a page that says how often it has shown its state (`data-refreshes` on its body): a wait
/// gives up once it has refreshed this many times without showing what is awaited, however slow
/// a busy machine makes each refresh.
const REFRESHES: u64 = 20;

/// The bound on a page that stopped refreshing altogether.
const HANG: Duration = Duration::from_secs(300);

/// W3C's key for an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Installs Debian's Chromium and chromedriver once, when chromedriver is not on PATH (and
/// `CHROMEDRIVER` names none): as root, or through sudo.
fn ensure_chromium() {
    static INSTALLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        let on_path = |program: &str| {
            Command::new("sh")
                .args(["-c", &format!("command -v {program}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if std::env::var_os("CHROMEDRIVER").is_some() || on_path("chromedriver") {
            return;
        }
        let root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
        let sudo = if root { "" } else { "sudo " };
        let script = format!(
            "{sudo}apt-get update -q && DEBIAN_FRONTEND=noninteractive {sudo}apt-get install -y -q chromium chromium-driver"
        );
        let installed = Command::new("sh")
            .args(["-c", &script])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            installed,
            "installing Debian's chromium and chromium-driver failed; run: \
             sudo apt-get install -y chromium chromium-driver (or set CHROMEDRIVER)"
        );
    });
}

impl Browser {
    /// Starts chromedriver on a free loopback port and a headless Chromium session.
    pub async fn start() -> Self {
        tokio::task::spawn_blocking(ensure_chromium)
            .await
            .expect("the install does not panic");
        let port = free_port();
        // Its own process group, which the browser it starts joins: ended together, whatever
        // the test's outcome (killing chromedriver alone left Chromium running).
        let driver = Command::new(std::env::var("CHROMEDRIVER").unwrap_or("chromedriver".into()))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver (Debian's chromium-driver) on PATH");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let ready = http.get(format!("{base}/status")).send().await;
            if let Ok(r) = ready {
                let status: Value = r.json().await.unwrap_or_default();
                if status["value"]["ready"] == true {
                    break;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "chromedriver never ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let binary = std::env::var("CHROMIUM").unwrap_or("/usr/bin/chromium".into());
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": binary,
                "args": ["--headless", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--disable-background-networking"]
            }
        }}});
        let mut browser = Browser {
            driver,
            base,
            session: String::new(),
            http,
        };
        let created = browser.send("POST", "/session", Some(capabilities)).await;
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        browser
    }

    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "POST" => self.http.post(url).json(&body.unwrap_or(json!({}))),
            "DELETE" => self.http.delete(url),
            _ => self.http.get(url),
        };
        let response = request.send().await.expect("chromedriver answers");
        let value: Value = response.json().await.expect("JSON from chromedriver");
        value["value"].clone()
    }

    fn session(&self, path: &str) -> String {
        format!("/session/{}{path}", self.session)
    }

    pub async fn open(&self, url: &str) {
        self.send("POST", &self.session("/url"), Some(json!({ "url": url })))
            .await;
    }

    /// The element `css` matches, if there is one now.
    pub async fn find(&self, css: &str) -> Option<String> {
        let found = self
            .send(
                "POST",
                &self.session("/element"),
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        found[ELEMENT].as_str().map(str::to_owned)
    }

    /// How many times the page says it has shown its state, if it says.
    async fn refreshes(&self) -> Option<u64> {
        let script = json!({"script": "return document.body.dataset.refreshes || null",
            "args": []});
        let said = self
            .send("POST", &self.session("/execute/sync"), Some(script))
            .await;
        said.as_str().and_then(|n| n.parse().ok())
    }

    /// Whether a wait begun at `started` (the page's refreshes then, and the time) has waited
    /// long enough: [`REFRESHES`] refreshes of the page, else [`DEADLINE`] for a page that does
    /// not count them; [`HANG`] for one that stopped.
    async fn waited_enough(&self, started: (Option<u64>, tokio::time::Instant)) -> bool {
        let elapsed = started.1.elapsed();
        match (started.0, self.refreshes().await) {
            (Some(then), Some(now)) => now >= then + REFRESHES || elapsed > HANG,
            _ => elapsed > DEADLINE,
        }
    }

    /// Waits until `css` matches an element whose text satisfies `check`; returns the element
    /// and its text. Gives up once the page has refreshed [`REFRESHES`] times without it.
    pub async fn wait_for(&self, css: &str, check: impl Fn(&str) -> bool) -> (String, String) {
        let started = (self.refreshes().await, tokio::time::Instant::now());
        let mut last = None;
        loop {
            if let Some(element) = self.find(css).await {
                let text = self.text(&element).await;
                if check(&text) {
                    return (element, text);
                }
                last = Some(text);
            }
            assert!(
                !self.waited_enough(started).await,
                "the page never showed {css} as expected (it showed {last:?})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until nothing matches `css`, as long as [`wait_for`](Self::wait_for) would.
    pub async fn wait_gone(&self, css: &str) {
        let started = (self.refreshes().await, tokio::time::Instant::now());
        while self.find(css).await.is_some() {
            assert!(
                !self.waited_enough(started).await,
                "{css} never left the page"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn text(&self, element: &str) -> String {
        let text = self
            .send(
                "GET",
                &self.session(&format!("/element/{element}/text")),
                None,
            )
            .await;
        text.as_str().unwrap_or_default().to_owned()
    }

    pub async fn click(&self, element: &str) {
        self.send(
            "POST",
            &self.session(&format!("/element/{element}/click")),
            None,
        )
        .await;
    }

    /// Ends the session, then (on drop) chromedriver and the browser.
    pub async fn close(self) {
        self.send("DELETE", &self.session(""), None).await;
    }
}

impl Drop for Browser {
    /// Kills chromedriver's whole process group, the browser and its helpers with it, whether
    /// the test passed or panicked.
    fn drop(&mut self) {
        use nix::{sys::signal::Signal, unistd::Pid};
        let group = Pid::from_raw(self.driver.id() as i32);
        let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
        let _ = self.driver.wait();
    }
}
