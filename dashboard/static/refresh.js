// Orca dashboard: the only script. Pages are complete without it; it adds an
// "auto-refresh" box that reloads the page every 10 s while ticked (the
// choice is remembered in this browser) and never while a form is in use.
(function () {
  var box = document.getElementById("autorefresh");
  if (!box) return;
  var input = box.querySelector("input");
  box.hidden = false;
  input.checked = window.localStorage.getItem("orca-autorefresh") === "on";
  input.addEventListener("change", function () {
    window.localStorage.setItem("orca-autorefresh", input.checked ? "on" : "off");
  });
  setInterval(function () {
    var a = document.activeElement;
    var editing = a && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA") && a !== input;
    if (input.checked && !document.hidden && !editing) window.location.reload();
  }, 10000);
})();
