//! matplotlib figures come back as PNG image content, once, and never stale.

use crate::common;

use base64::Engine as _;
use common::Server;
use serde_json::json;

fn pngs(r: &rmcp::model::CallToolResult) -> Vec<Vec<u8>> {
    r.content
        .iter()
        .filter_map(|c| c.as_image())
        .map(|i| {
            assert_eq!(i.mime_type, "image/png");
            base64::engine::general_purpose::STANDARD
                .decode(&i.data)
                .expect("valid base64")
        })
        .collect()
}

fn png_size(png: &[u8]) -> (u32, u32) {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&png[12..16], b"IHDR");
    let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
    (w, h)
}

#[tokio::test]
async fn plots_come_back_as_png_images() {
    let s = Server::start().await;
    let id = s.create().await;
    let r = s
        .call(
            "execute_code",
            json!({"sandbox_id": id, "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()"}),
        )
        .await;
    assert_eq!(r.is_error, Some(false), "{:?}", r.content);
    let images = pngs(&r);
    assert_eq!(images.len(), 1);
    let (w, h) = png_size(&images[0]);
    assert!(w > 100 && h > 100, "{w}x{h}");
    assert_eq!(r.structured_content.as_ref().unwrap()["images"], 1);
    let said = format!(
        "{} {}",
        crate::common::text_of(&r),
        r.structured_content.as_ref().unwrap()
    );
    assert!(
        !said.contains("non-interactive"),
        "plt.show() printed matplotlib's window warning: {said}"
    );

    let r = s
        .call(
            "execute_code",
            json!({"sandbox_id": id, "code": "fig1 = plt.figure(); plt.plot([1, 2])\nfig2 = plt.figure(); plt.bar(['a', 'b'], [3, 4])"}),
        )
        .await;
    assert_eq!(pngs(&r).len(), 2, "two open figures, two images");

    let r = s
        .call("execute_code", json!({"sandbox_id": id, "code": "x = 1"}))
        .await;
    assert!(pngs(&r).is_empty(), "no stale figure from the last call");
    let r = s
        .call(
            "execute_code",
            json!({"sandbox_id": id, "code": "len(plt.get_fignums())"}),
        )
        .await;
    assert_eq!(r.structured_content.as_ref().unwrap()["result"], "0");

    // Saving to a file works too, and the file is readable from the host.
    let v = s.run_ok(&id, "plt.figure(); plt.plot([3, 1]); plt.savefig('chart.png'); plt.close('all')\nimport os\nos.path.getsize('chart.png') > 1000").await;
    assert_eq!(v["result"], "True");
    assert_eq!(v["images"], 0, "a closed figure is not sent");
    let r = s
        .call("read_file", json!({"sandbox_id": id, "file_path": "chart.png"}))
        .await;
    let v = r.structured_content.clone().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v["content_base64"].as_str().unwrap())
        .unwrap();
    png_size(&bytes);
    assert_eq!(
        pngs(&r),
        vec![bytes.clone()],
        "read_file shows a PNG as an image too"
    );
    s.stop().await;
}

#[tokio::test]
async fn sandbox_files_are_resources() {
    let s = Server::start().await;
    let id = s.create().await;
    s.exec(&id, "import os\nos.makedirs('out', exist_ok=True)\nopen('out/table.csv', 'w').write('a,b\\n1,2\\n')\nopen('blob.bin', 'wb').write(bytes(range(256)))").await;
    let listed = s.client.list_all_resources().await.expect("resources/list");
    let uris: Vec<String> = listed.iter().map(|r| r.uri.clone()).collect();
    let csv_uri = format!("sandbox://{id}/out/table.csv");
    assert!(uris.contains(&csv_uri), "{uris:?}");
    assert!(uris.contains(&format!("sandbox://{id}/blob.bin")), "{uris:?}");
    let csv = listed.iter().find(|r| r.uri == csv_uri).unwrap();
    assert_eq!(csv.mime_type.as_deref(), Some("text/csv"));
    assert_eq!(csv.size, Some(8));

    let read = s
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(csv_uri.clone()))
        .await
        .unwrap();
    match &read.contents[0] {
        rmcp::model::ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "a,b\n1,2\n"),
        other => panic!("expected text, got {other:?}"),
    }
    let read = s
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "sandbox://{id}/blob.bin"
        )))
        .await
        .unwrap();
    match &read.contents[0] {
        rmcp::model::ResourceContents::BlobResourceContents { blob, .. } => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(blob).unwrap();
            assert_eq!(bytes, (0..=255u8).collect::<Vec<u8>>());
        }
        other => panic!("expected a blob, got {other:?}"),
    }
    let bad = s
        .client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "sandbox://{id}/../../etc/passwd"
        )))
        .await;
    assert!(bad.is_err(), "an escaping resource URI is refused");
    s.stop().await;
}
