// Orca dashboard: the only script. Pages are complete without it; it adds an
// "auto-refresh" box that reloads the page every 10 s while ticked (the
// choice is remembered in this browser), never while a form is in use or
// holds something typed but not yet sent (a settings change, a gate name,
// a ticked confirmation), so nothing typed is lost to a reload.
(function () {
  var box = document.getElementById("autorefresh");
  if (!box) return;
  var input = box.querySelector("input");
  box.hidden = false;
  input.checked = window.localStorage.getItem("orca-autorefresh") === "on";
  input.addEventListener("change", function () {
    window.localStorage.setItem("orca-autorefresh", input.checked ? "on" : "off");
  });
  function changed(el) {
    if (el === input || el.type === "hidden") return false;
    if (el.type === "checkbox" || el.type === "radio") return el.checked !== el.defaultChecked;
    if (el.tagName === "SELECT") {
      for (var i = 0; i < el.options.length; i++) {
        if (el.options[i].selected !== el.options[i].defaultSelected) return true;
      }
      return false;
    }
    return el.value !== el.defaultValue;
  }
  function unsent() {
    var fields = document.querySelectorAll("form input, form select, form textarea");
    for (var i = 0; i < fields.length; i++) {
      if (changed(fields[i])) return true;
    }
    return false;
  }
  setInterval(function () {
    var a = document.activeElement;
    var editing = a && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA") && a !== input;
    if (input.checked && !document.hidden && !editing && !unsent()) window.location.reload();
  }, 10000);
})();
