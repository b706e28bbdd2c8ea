//! Bidirectional-override characters spoofed the approval card:
//! `open invoice\u202efdp.exe` showed as `open invoice"exe.pdf`. Here a
//! persona's call carries bidi and zero-width characters; the approval
//! queue and the run's page in Chromium, and the CLI, show each as its
//! escape, and the text as rendered holds none of them.

use serde_json::{Value, json};

use crate::common::{skillhost, stdout};
use crate::console::{
    Chromium, admin_token, data_dir, persona_call, sign_in_browser, start, wait_for,
};

/// Characters that render as nothing or reorder the text around them.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}')
}

fn assert_revealed(text: &str, where_: &str) {
    assert!(
        !text.chars().any(invisible),
        "{where_} shows an invisible or bidi character raw: {text:?}"
    );
    for escaped in [
        r"open invoice\u202efdp.exe",
        r"pay\u200bpal",
        r"\u2066x\u2069",
        r"\udb40\udc41",
    ] {
        assert!(text.contains(escaped), "{where_} lacks {escaped}: {text}");
    }
}

#[test]
fn bidi_and_zero_width_characters_in_arguments_show_as_escapes() {
    let work = tempfile::tempdir().expect("tempdir");
    let (data, persona_token) = data_dir(work.path());
    let server = start(&data);
    let port = server.port;
    let admin = admin_token(&data);
    let waiting = persona_call(
        port,
        &persona_token,
        json!({
            "text": "open invoice\u{202e}fdp.exe and pay\u{200b}pal \u{E0041}",
            "pattern": "\u{2066}x\u{2069}",
            "replacement": "#",
        }),
    );
    let chromium = Chromium::start(work.path());
    chromium.rt.block_on(async {
        use fantoccini::Locator;
        let c = chromium.open().await;
        let base = format!("http://127.0.0.1:{port}");
        sign_in_browser(&c, &base, &admin).await;
        wait_for(&c, Locator::Id(&waiting), 10)
            .await
            .expect("the waiting call");
        let read = "const e = document.querySelector(arguments[0]); return e ? e.innerText : null";
        let card = c
            .execute(read, vec![json!(format!("[id='{waiting}'] pre.args"))])
            .await
            .expect("read the card");
        assert_revealed(
            card.as_str().expect("the card's arguments"),
            "the approval card",
        );
        // Each string stands apart: its direction cannot run into the
        // next.
        let isolated = c
            .execute(
                "const b = document.querySelectorAll(arguments[0]); return b.length > 0 && \
                 Array.from(b).every((e) => getComputedStyle(e).unicodeBidi === 'isolate')",
                vec![json!(format!("[id='{waiting}'] pre.args bdi"))],
            )
            .await
            .expect("read the styles");
        assert_eq!(
            isolated,
            json!(true),
            "the arguments' strings are not isolated"
        );

        crate::console::goto(&c, &format!("{base}/runs/{waiting}")).await;
        wait_for(&c, Locator::Css("pre.args"), 10)
            .await
            .expect("the run's arguments");
        let page = c
            .execute(read, vec![json!("pre.args")])
            .await
            .expect("read the run");
        assert_revealed(
            page.as_str().expect("the run's arguments"),
            "the run's page",
        );
        c.close().await.expect("close the browser");
    });

    // The CLI shows the same.
    let o = skillhost(&data, &["runs", "show", &waiting]);
    assert_revealed(&stdout(&o), "`runs show`");
    let o = skillhost(&data, &["runs", "list", "--pending", "--json"]);
    assert_revealed(&stdout(&o), "`runs list --pending --json`");
    let listed: Value = serde_json::from_str(&stdout(&o)).expect("still JSON");
    assert_eq!(
        listed[0]["args"]["text"], "open invoice\u{202e}fdp.exe and pay\u{200b}pal \u{E0041}",
        "the JSON means the same"
    );
    drop(server);
}
