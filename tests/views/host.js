// The host page's script: what Claude or another MCP Apps host does with a tool result that
// links a view, built on the official host bridge (@modelcontextprotocol/ext-apps). Bundled
// for the browser by view.test.mjs; the MCP client itself lives in the test (node), reached
// through functions the test exposes on the page (mcpReadResource, mcpCallTool). The page
// looks like a conversation in Claude's light or dark theme, so screenshots show the view
// as a user sees it: on the host's background, inline at most 500 px tall.
import { AppBridge, PostMessageTransport } from '@modelcontextprotocol/ext-apps/app-bridge';

// Claude's conversation backgrounds; the view's text must meet WCAG AA on them.
export const BACKGROUNDS = { light: '#faf9f5', dark: '#262624' };
window.hostBackgrounds = BACKGROUNDS;

window.downloads = [];
window.toolCalls = [];
window.openedLinks = [];
window.displayModes = [];

window.showResult = async ({ uri, input, result, theme, width = 880, caption = '' }) => {
  const bg = BACKGROUNDS[theme] ?? BACKGROUNDS.light;
  document.documentElement.style.colorScheme = theme;
  document.body.style.cssText = `margin: 0; padding: 24px 28px; background: ${bg}; color: ${theme === 'dark' ? '#eee' : '#222'}; font: 15px/1.5 system-ui, sans-serif;`;
  const iframe = document.createElement('iframe');
  iframe.setAttribute('sandbox', 'allow-scripts');
  iframe.title = 'result view';
  iframe.style.cssText = `width: ${width}px; height: 300px; border: 0; display: block; background: transparent; color-scheme: ${theme};`;
  const said = document.createElement('p');
  said.textContent = caption;
  said.style.cssText = 'margin: 0 0 12px; opacity: .85;';
  document.body.replaceChildren(...(caption ? [said] : []), iframe);
  const context = { theme, displayMode: 'inline', availableDisplayModes: ['inline', 'fullscreen'] };
  const bridge = new AppBridge(
    null,
    { name: 'view-test-host', version: '1.0.0' },
    { serverTools: {}, downloadFile: {}, openLinks: {} },
    { hostContext: context },
  );
  let fullscreen = false;
  bridge.oncalltool = async (params) => {
    window.toolCalls.push(params.name);
    return JSON.parse(await window.mcpCallTool(JSON.stringify(params)));
  };
  bridge.ondownloadfile = async ({ contents }) => {
    window.downloads.push(contents);
    return {};
  };
  bridge.onopenlink = async ({ url }) => {
    window.openedLinks.push(url);
    return {};
  };
  bridge.onrequestdisplaymode = async ({ mode }) => {
    window.displayModes.push(mode);
    fullscreen = mode === 'fullscreen';
    bridge.setHostContext({ ...context, displayMode: mode });
    return { mode };
  };
  // Inline, the host grows the frame to the view's height, up to the 500 px it allows.
  bridge.onsizechange = ({ height }) => {
    if (height) iframe.style.height = `${fullscreen ? height : Math.min(height, 500)}px`;
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
