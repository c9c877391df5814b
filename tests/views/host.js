// The host page's script: what Claude or another MCP Apps host does with a tool result that
// links a view, built on the official host bridge (@modelcontextprotocol/ext-apps). Bundled
// for the browser by view.test.mjs; the MCP client itself lives in the test (node), reached
// through functions the test exposes on the page (mcpReadResource, mcpCallTool).
import { AppBridge, PostMessageTransport } from '@modelcontextprotocol/ext-apps/app-bridge';

window.downloads = [];
window.toolCalls = [];

window.showResult = async ({ uri, input, result, theme }) => {
  const iframe = document.createElement('iframe');
  iframe.setAttribute('sandbox', 'allow-scripts');
  iframe.title = 'result view';
  iframe.style.cssText = 'width: 880px; height: 300px; border: 1px solid #ccc; display: block;';
  document.body.replaceChildren(iframe);
  const bridge = new AppBridge(
    null,
    { name: 'view-test-host', version: '1.0.0' },
    { serverTools: {}, downloadFile: {} },
    { hostContext: { theme, displayMode: 'inline' } },
  );
  bridge.oncalltool = async (params) => {
    window.toolCalls.push(params.name);
    return JSON.parse(await window.mcpCallTool(JSON.stringify(params)));
  };
  bridge.ondownloadfile = async ({ contents }) => {
    window.downloads.push(contents);
    return {};
  };
  bridge.onsizechange = ({ height }) => {
    if (height) iframe.style.height = `${Math.min(height + 4, 2000)}px`;
  };
  const ready = new Promise((resolve) => {
    bridge.oninitialized = resolve;
  });
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = await window.mcpReadResource(uri);
  await ready;
  await bridge.sendToolInput({ arguments: input });
  await bridge.sendToolResult(result);
  return true;
};
